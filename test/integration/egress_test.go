package integration

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
	"github.com/baton-dev/baton/test/toolservers"
)

// internalTool is a CountingTool on 127.0.0.2: an address inside the cluster as far as the
// operator's egress policy is concerned (the suite allows 127.0.0.1 only).
func internalTool() (*toolservers.CountingTool, string) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	Expect(err).NotTo(HaveOccurred())
	tool := &toolservers.CountingTool{}
	s := &httptest.Server{Listener: l, Config: &http.Server{Handler: tool}}
	s.Start()
	DeferCleanup(s.Close)
	return tool, s.URL
}

var _ = Describe("The egress policy", func() {
	var ns string
	var model *fakes.OpenAI
	BeforeEach(func() {
		ns = newNamespace()
		model = fakes.NewOpenAI()
		DeferCleanup(model.Close)
	})

	// aToolCall has the researcher call crm once, then hand off to the writer.
	aToolCall := func() {
		model.ReplyTo("researcher",
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "crm__crm", Args: `{"customer":"acme"}`}}},
			fakes.Reply{Tokens: 10, ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"looked up"}`}}},
		)
	}
	team := func(toolURL string) *v1alpha1.AgentConfig {
		return MakeConfig("team", ns).HTTPTool("crm", toolURL).Agents(
			modelAgent("researcher", model).HandsOffTo("writer").Tools(Uses("crm")),
			MakeAgent("writer").Terminator().Script(Says("Done.")),
		).Obj()
	}
	toolResult := func() string {
		sent := model.Requests()
		Expect(sent).To(HaveLen(2))
		results := sent[1].ToolResults()
		Expect(results).To(HaveLen(1))
		return results[0].Content
	}

	It("refuses a tool inside the cluster, and the tool is never called", func() {
		inside, url := internalTool()
		aToolCall()
		run := MakeRun("r1", ns).Config("team").Input("Look up Acme").Obj()
		create(apiKeySecret(ns), team(url+"/call"), run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(toolResult()).To(And(HavePrefix("error: "), ContainSubstring("egress policy refuses 127.0.0.2 (loopback)")))
		Expect(inside.Calls()).To(BeEmpty())
	})

	It("calls a tool the admin allowed, and refuses its redirect inside the cluster", func() {
		inside, insideURL := internalTool()
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, insideURL+"/call", http.StatusTemporaryRedirect)
		}))
		DeferCleanup(redirecting.Close)
		allowed := toolservers.NewCountingTool()
		DeferCleanup(allowed.Close)

		By("an allowed tool on 127.0.0.1 answers")
		aToolCall()
		run := MakeRun("r1", ns).Config("team").Input("Look up Acme").Obj()
		create(apiKeySecret(ns), team(allowed.URL), run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(allowed.Calls()).To(HaveLen(1))
		Expect(toolResult()).NotTo(HavePrefix("error: "))

		By("the same address answering 307 to 127.0.0.2 is not followed")
		ns = newNamespace()
		model = fakes.NewOpenAI()
		DeferCleanup(model.Close)
		aToolCall()
		run = MakeRun("r2", ns).Config("team").Input("Look up Acme").Obj()
		create(apiKeySecret(ns), team(redirecting.URL+"/call"), run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(toolResult()).To(And(HavePrefix("error: "), ContainSubstring("refuses to follow a redirect to another origin")))
		Expect(inside.Calls()).To(BeEmpty(), "the redirect's target was called")
	})

	It("fails the step of a model endpoint whose name resolves to the metadata address, naming the policy", func() {
		agent := modelAgent("researcher", model).Terminator()
		agent.Model.Endpoint = strings.Replace(model.BaseURL(), "127.0.0.1", "metadata.test", 1)
		cfg := MakeConfig("team", ns).MaxErrors(1).Agents(agent).Obj()
		run := MakeRun("r1", ns).Config(cfg.Name).Input("Anything").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonTooManyErrors))
		Expect(run.Status.TerminationMessage).To(ContainSubstring("egress policy refuses 169.254.169.254 (link-local, cloud metadata)"))
		Expect(model.Requests()).To(BeEmpty())
		Expect(run.Status.ErrorCount).To(BeEquivalentTo(1), "a refusal is not retried")
	})
})
