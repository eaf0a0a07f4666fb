package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/test/toolservers"
)

// countingAgent is an HTTP agent that logs every call it answers: a relay between two agents
// for six steps, each answer taking 150 to 400 ms.
type countingAgent struct {
	*httptest.Server
	mu    sync.Mutex
	calls []agentCall
}

// agentCall is one request to the agent: which step of which run, when it came, and when its
// answer was written (zero if the caller went away first).
type agentCall struct {
	key      string
	run      string
	step     int
	began    time.Time
	answered time.Time
}

const relaySteps = 6

func newCountingAgent() *countingAgent {
	a := &countingAgent{}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	return a
}

func (a *countingAgent) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Run   struct{ Name string } `json:"run"`
		Step  int                   `json:"step"`
		Agent struct{ Name string } `json:"agent"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	call := agentCall{key: r.Header.Get("Idempotency-Key"), run: req.Run.Name, step: req.Step, began: time.Now()}
	select {
	case <-time.After(time.Duration(150+(req.Step*37+len(req.Run.Name)*53)%250) * time.Millisecond):
	case <-r.Context().Done():
		a.record(call)
		return
	}
	answer := map[string]any{"output": fmt.Sprintf("%s: step %d done", req.Agent.Name, req.Step), "tokens": 10}
	if req.Step < relaySteps {
		answer["handoff"] = map[string]string{"a": "b", "b": "a"}[req.Agent.Name]
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(answer); err == nil {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		call.answered = time.Now()
	}
	a.record(call)
}

func (a *countingAgent) record(c agentCall) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, c)
}

func (a *countingAgent) log() []agentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentCall(nil), a.calls...)
}

// startRuns applies n runs of the config, named <config>-00 and on.
func startRuns(ns, config string, n int) {
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: agents.baton.dev/v1alpha1\nkind: AgentRun\nmetadata: {name: %s-%02d}\nspec: {configRef: {name: %s}}", config, i, config))
	}
	kubectl("apply", "-n", ns, "-f", manifest(config+"-runs.yaml", strings.Join(docs, "\n---\n")))
}

var _ = Describe("An operator killed mid-step", Ordered, func() {
	It("never calls a step that had ended again, and loses and repeats no handoff", func() {
		agent := newCountingAgent()
		DeferCleanup(agent.Close)
		kubectl("create", "namespace", "restarts")
		kubectl("apply", "-n", "restarts", "-f", manifest("relay.yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: relay}
spec:
  entrypoint: a
  agents:
  - {name: a, handoffs: [b], model: {provider: HTTP, endpoint: "%[1]s"}}
  - {name: b, handoffs: [a], terminator: true, model: {provider: HTTP, endpoint: "%[1]s"}}
  loopDetection: {allow: [{cycle: [a, b], maxRepeats: 10}]}
`, agent.URL+"/step")))
		const runs = 40
		startRuns("restarts", "relay", runs)

		By("killing the operator with SIGKILL five times while steps are in flight")
		var kills []time.Time
		for range 5 {
			time.Sleep(1200 * time.Millisecond)
			kills = append(kills, time.Now())
			killManager()
		}
		Eventually(func() string {
			return kubectl("get", "agentruns", "-n", "restarts", "-o", "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}")
		}, 3*time.Minute, time.Second).Should(Equal(strings.Repeat("Succeeded\n", runs)))

		By("checking every run took each of its steps once")
		out := kubectl("get", "agentruns", "-n", "restarts", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.stepCount} {.status.handoffCount} {range .status.handoffSequence[*]}{.step},{end}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			Expect(strings.Fields(line)[1:]).To(Equal([]string{"6", "5", "1,2,3,4,5,6,"}), line)
		}

		By("counting the agent's calls")
		calls := agent.log()
		byKey := map[string][]agentCall{}
		for _, c := range calls {
			byKey[c.key] = append(byKey[c.key], c)
		}
		Expect(byKey).To(HaveLen(runs*relaySteps), "distinct steps called")
		// A repeated call is right only for a step whose first answer could not have been recorded
		// before a kill: one killed in flight, or answered less than a second before a kill.
		var repeated, unjustified []string
		answeredThenRepeated := 0
		for key, cs := range byKey {
			if len(cs) == 1 {
				continue
			}
			sort.Slice(cs, func(i, j int) bool { return cs[i].began.Before(cs[j].began) })
			first := cs[0]
			repeated = append(repeated, fmt.Sprintf("%s step %d x%d", first.run, first.step, len(cs)))
			if !first.answered.IsZero() {
				answeredThenRepeated++
			}
			justified := false
			for _, k := range kills {
				if k.After(first.began) && (first.answered.IsZero() || k.Before(first.answered.Add(time.Second))) {
					justified = true
				}
			}
			if !justified {
				unjustified = append(unjustified, fmt.Sprintf("%s step %d (key %s), first answered %s", first.run, first.step, key, first.answered.Format(time.StampMilli)))
			}
		}
		AddReportEntry("agent calls", fmt.Sprintf("%d calls for %d steps across %d kills; repeated: %d (%v)",
			len(calls), runs*relaySteps, len(kills), len(repeated), repeated))
		GinkgoWriter.Printf("Agent calls: %d for %d steps across %d kills; steps called again: %d, of which answered before the kill: %d\n",
			len(calls), runs*relaySteps, len(kills), len(repeated), answeredThenRepeated)
		Expect(unjustified).To(BeEmpty(), "steps called again after their answer was recorded")
		Expect(logOf("manager")).To(ContainSubstring("Transcript store open"))
	})

	It("never sends a call of a tool with side effects twice", func() {
		crm := toolservers.NewCountingTool()
		DeferCleanup(crm.Close)
		crm.SetDelay(250 * time.Millisecond)
		turn := func(agent string, n int, next string) string {
			t := fmt.Sprintf(`{output: "%[1]s%[2]d", toolCalls: [{server: crm, tool: file, arguments: {note: "%[1]s%[2]d"}}], delay: 150ms`, agent, n)
			if next != "" {
				t += ", handoff: " + next
			}
			return t + "}"
		}
		kubectl("create", "namespace", "tool-restarts")
		kubectl("apply", "-n", "tool-restarts", "-f", manifest("filer.yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: filer}
spec:
  entrypoint: a
  toolServers:
  - {name: crm, http: {url: "%s", tool: file}}
  agents:
  - {name: a, handoffs: [b], tools: [{server: crm, sideEffects: true}], script: [%s, %s, %s]}
  - {name: b, handoffs: [a], terminator: true, tools: [{server: crm, sideEffects: true}], script: [%s, %s, %s]}
  loopDetection: {allow: [{cycle: [a, b], maxRepeats: 10}]}
`, crm.URL, turn("a", 1, "b"), turn("a", 2, "b"), turn("a", 3, "b"), turn("b", 1, "a"), turn("b", 2, "a"), turn("b", 3, ""))))
		const runs = 30
		startRuns("tool-restarts", "filer", runs)

		By("killing the operator with SIGKILL five times while tool calls are in flight")
		for range 5 {
			time.Sleep(1500 * time.Millisecond)
			killManager()
		}
		Eventually(func() string {
			return kubectl("get", "agentruns", "-n", "tool-restarts", "-o", "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}")
		}, 3*time.Minute, time.Second).Should(Equal(strings.Repeat("Succeeded\n", runs)))

		By("counting the tool's calls by idempotency key")
		out := kubectl("get", "agentruns", "-n", "tool-restarts", "-o", `jsonpath={range .items[*]}{.status.stepCount} {.status.toolCalls}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			Expect(strings.Fields(line)).To(Equal([]string{"6", "6"}), line)
		}
		calls := crm.Calls()
		keys := map[string]int{}
		for _, c := range calls {
			keys[c.IdempotencyKey]++
		}
		AddReportEntry("side-effecting tool calls", fmt.Sprintf("%d calls, %d distinct, for %d steps across 5 kills; in flight at a kill: %d; repeated: %d",
			len(calls), len(keys), runs*6, crm.Unanswered(), crm.Repeated()))
		GinkgoWriter.Printf("Tool calls: %d (%d distinct keys) for %d steps across 5 kills; in flight at a kill: %d; repeated: %d\n",
			len(calls), len(keys), runs*6, crm.Unanswered(), crm.Repeated())
		Expect(crm.Repeated()).To(BeZero(), "side-effecting calls sent twice")
		Expect(len(keys)).To(BeNumerically("<=", runs*6))
	})
})
