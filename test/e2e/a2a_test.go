package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/test/a2ajs"
	"github.com/baton-dev/baton/test/nodeservers"
)

// a2aLine is one line order-client.mjs prints.
type a2aLine struct {
	Kind, ID, ContextID, State, Text, Error string
}

var _ = Describe("A2A both ways, with the A2A JavaScript SDK", Ordered, func() {
	const ns = "a2a"
	var agentURL string
	var env []string
	var script string

	// orderClient runs the sample client with args and returns what it printed, line by line.
	orderClient := func(args ...string) []a2aLine {
		node, err := nodeservers.Node()
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := osexec.CommandContext(ctx, node, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), "node order-client.mjs %v:\n%s\n%s", args, out, stderr.String())
		var lines []a2aLine
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			var l a2aLine
			Expect(json.Unmarshal(sc.Bytes(), &l)).To(Succeed(), "%s", sc.Text())
			lines = append(lines, l)
		}
		Expect(lines).NotTo(BeEmpty())
		return lines
	}
	last := func(lines []a2aLine) a2aLine { return lines[len(lines)-1] }

	BeforeAll(func() {
		stock, err := a2ajs.StartStockAgent(context.Background())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stock.Stop)
		script, err = a2ajs.Script(context.Background(), "order-client.mjs")
		Expect(err).NotTo(HaveOccurred())

		kubectl("create", "namespace", ns)
		desk := strings.ReplaceAll(readFile(sample(filepath.Join("a2a", "order-desk.yaml"))), "http://127.0.0.1:9310", stock.URL)
		kubectl("apply", "-n", ns, "-f", manifest("order-desk.yaml", desk))

		// The caller is a ServiceAccount that may start the namespace's runs and read its configs.
		kubectl("create", "serviceaccount", "order-clerk", "-n", ns)
		kubectl("create", "role", "order-clerk", "-n", ns, "--verb=create", "--resource=agentruns.agents.baton.dev")
		kubectl("create", "role", "order-desk-reader", "-n", ns, "--verb=get", "--resource=agentconfigs.agents.baton.dev")
		kubectl("create", "rolebinding", "order-clerk", "-n", ns, "--role=order-clerk", "--serviceaccount="+ns+":order-clerk")
		kubectl("create", "rolebinding", "order-desk-reader", "-n", ns, "--role=order-desk-reader", "--serviceaccount="+ns+":order-clerk")
		// Its token is made for Baton, as docs/a2a.md says: one for the API server is refused.
		token := strings.TrimSpace(kubectl("create", "token", "order-clerk", "-n", ns, "--audience", "agents.baton.dev"))

		// The operator serves A2A beside the transcript API, with its certificate.
		addr := regexp.MustCompile(`--transcript-bind-address=(\S+)`).FindStringSubmatch(readFile(filepath.Join(stateDir, "webhook.flags")))
		Expect(addr).To(HaveLen(2))
		agentURL = "https://" + addr[1] + "/namespaces/" + ns + "/agentconfigs/order-desk"
		// The CA that signed the operator's certificate, as docs/a2a.md reads it: Node trusts the
		// operator only through a CA, never a leaf given as one.
		ca, err := base64.StdEncoding.DecodeString(kubectl("get", "service", "baton-transcript", "-n", "baton-system",
			"-o", `jsonpath={.metadata.annotations.agents\.baton\.dev/transcript-ca}`))
		Expect(err).NotTo(HaveOccurred())
		env = []string{"A2A_TOKEN=" + token, "NODE_EXTRA_CA_CERTS=" + manifest("baton-ca.crt", string(ca))}
	})

	It("runs the sample's own run: its A2A stock clerk asks, and a person's kubectl reply continues the same task", func() {
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingInput", "--timeout=60s", "agentrun/ord-7")
		Expect(jsonpath("agentrun", "ord-7", ns, "{.status.pendingInput.agent}: {.status.pendingInput.question}")).
			To(Equal("stock: Which warehouse: berlin or lyon?"))
		kubectl("annotate", "-n", ns, "agentrun/ord-7", "agents.baton.dev/reply=berlin")
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "agentrun/ord-7")
		Expect(jsonpath("agentrun", "ord-7", ns, "{.status.output}")).To(HavePrefix("Order ORD-7 can ship today"))
		Expect(kubectl("baton", "-n", ns, "transcript", "ord-7")).To(ContainSubstring("counting SKU-123 in berlin"),
			"the stock agent's progress is in the transcript")
	})

	It("is called by the JavaScript SDK's client: a send asks for input, the reply completes the same task", func() {
		asked := last(orderClient(agentURL, "send", "Can order ORD-7 (3 x SKU-123) ship today?"))
		Expect(asked.State).To(Equal("TASK_STATE_INPUT_REQUIRED"), "%+v", asked)
		Expect(asked.Text).To(Equal("Which warehouse: berlin or lyon?"))
		Expect(jsonpath("agentrun", asked.ID, ns, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).
			To(Equal("system:serviceaccount:"+ns+":order-clerk"), "the run records who asked")

		done := last(orderClient(agentURL, "reply", asked.ID, asked.ContextID, "berlin"))
		Expect(done.ID).To(Equal(asked.ID))
		Expect(done.State).To(Equal("TASK_STATE_COMPLETED"), "%+v", done)
		Expect(done.Text).To(HavePrefix("Order ORD-7 can ship today"))
		Expect(last(orderClient(agentURL, "get", asked.ID)).State).To(Equal("TASK_STATE_COMPLETED"))
	})

	It("continues a context: the next message is the next turn of the sender's session, given the first", func() {
		asked := last(orderClient(agentURL, "send", "Can order ORD-7 (3 x SKU-123) ship today?"))
		first := asked.ID
		Expect(asked.State).To(Equal("TASK_STATE_INPUT_REQUIRED"), "%+v", asked)
		Expect(last(orderClient(agentURL, "reply", first, asked.ContextID, "berlin")).State).To(Equal("TASK_STATE_COMPLETED"))

		next := last(orderClient("--now", agentURL, "continue", asked.ContextID, "And can ORD-8 ship today?"))
		Expect(next.ID).NotTo(Equal(first))
		Expect(next.ContextID).To(Equal(asked.ContextID))
		session := jsonpath("agentrun", first, ns, "{.spec.session.name}")
		Expect(session).NotTo(BeEmpty(), "a message's run is a turn of its context's session")
		Expect(jsonpath("agentrun", next.ID, ns, "{.spec.session.name}")).To(Equal(session))
		Expect(jsonpath("agentsession", session, ns, `{.metadata.annotations.agents\.baton\.dev/created-by}`)).
			To(Equal("system:serviceaccount:"+ns+":order-clerk"), "the session is its sender's")
		Eventually(func() string { return kubectl("baton", "-n", ns, "transcript", next.ID) }).
			Should(ContainSubstring("given 1 earlier turns"), "the second turn is given the first")
	})

	It("streams a task to its question and its reply to the end", func() {
		events := orderClient(agentURL, "stream", "Can order ORD-7 (3 x SKU-123) ship today?")
		Expect(events[0].Kind).To(Equal("task"))
		asked := last(events)
		Expect(asked.State).To(Equal("TASK_STATE_INPUT_REQUIRED"), "%+v", events)
		Expect(asked.Text).To(Equal("Which warehouse: berlin or lyon?"))

		events = orderClient(agentURL, "stream-reply", asked.ID, asked.ContextID, "berlin")
		Expect(last(events).State).To(Equal("TASK_STATE_COMPLETED"), "%+v", events)
		var artifact string
		for _, e := range events {
			if e.Kind == "artifact" {
				artifact = e.Text
			}
		}
		Expect(artifact).To(HavePrefix("Order ORD-7 can ship today"))
	})

	It("speaks A2A 0.3: resubscribes to a task that waits, which a person's reply then completes; and cancels another", func() {
		asked := last(orderClient("--v0.3", agentURL, "send", "Can order ORD-7 (3 x SKU-123) ship today?"))
		Expect(asked.State).To(Equal("TASK_STATE_INPUT_REQUIRED"), "%+v", asked)

		// Resubscribed, the client holds the task as it waits; the reply, made with kubectl,
		// sets it to work, and the stream follows it to its end.
		node, err := nodeservers.Node()
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := osexec.CommandContext(ctx, node, script, "--v0.3", agentURL, "resubscribe", asked.ID)
		cmd.Env = append(os.Environ(), env...)
		stdout, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		lines := bufio.NewScanner(stdout)
		var events []a2aLine
		next := func() bool {
			if !lines.Scan() {
				return false
			}
			var l a2aLine
			Expect(json.Unmarshal(lines.Bytes(), &l)).To(Succeed(), "%s", lines.Text())
			events = append(events, l)
			return true
		}
		Expect(next()).To(BeTrue(), "the resubscribed stream starts with the task")
		Expect(events[0].Kind).To(Equal("task"))
		Expect(events[0].State).To(Equal("TASK_STATE_INPUT_REQUIRED"))
		kubectl("annotate", "-n", ns, "agentrun/"+asked.ID, "agents.baton.dev/reply=berlin")
		for next() {
		}
		Expect(cmd.Wait()).To(Succeed())
		Expect(last(events).State).To(Equal("TASK_STATE_COMPLETED"), "%+v", events)

		other := last(orderClient("--v0.3", agentURL, "send", "Can order ORD-7 (3 x SKU-123) ship today?"))
		Expect(other.ID).NotTo(Equal(asked.ID))
		cancelled := last(orderClient("--v0.3", agentURL, "cancel", other.ID))
		Expect(cancelled.State).To(Equal("TASK_STATE_CANCELED"), "%+v", cancelled)
		Expect(jsonpath("agentrun", other.ID, ns, "{.status.phase}")).To(Equal("Cancelled"))
	})
})
