package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/baton-dev/baton/test/toolservers"
)

// span is a span as the collector's file exporter writes it (OTLP JSON).
type span struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Kind         int    `json:"kind"`
	Attributes   []struct {
		Key   string `json:"key"`
		Value struct {
			StringValue *string `json:"stringValue"`
			IntValue    *string `json:"intValue"`
		} `json:"value"`
	} `json:"attributes"`
	Status struct {
		Code int `json:"code"`
	} `json:"status"`
}

// attr is a span's attribute, as text; "" when it has none of that name.
func (s span) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			switch {
			case a.Value.StringValue != nil:
				return *a.Value.StringValue
			case a.Value.IntValue != nil:
				return *a.Value.IntValue
			}
		}
	}
	return ""
}

// OTLP span kinds.
const (
	kindInternal = 1
	kindClient   = 3
)

// spansOf reads the collector's file: the spans of one trace.
func spansOf(traceID string) []span {
	f, err := os.Open(traceFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []span
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var batch struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []span `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if json.Unmarshal(sc.Bytes(), &batch) != nil {
			continue
		}
		for _, rs := range batch.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.TraceID == traceID {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

// tracingAgent is an HTTP agent that keeps the traceparent header of each call.
type tracingAgent struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
}

func newTracingAgent() *tracingAgent {
	a := &tracingAgent{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.parents = append(a.parents, r.Header.Get("traceparent"))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output": "the customer's VPN profile is stale", "handoff": "closer", "tokens": 30, "inputTokens": 20}`))
	}))
	return a
}

func (a *tracingAgent) traceparents() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.parents...)
}

var _ = Describe("The operator's traces", Ordered, func() {
	const ns = "traces"
	var (
		scout *tracingAgent
		crm   *toolservers.CountingTool
	)
	BeforeAll(func() {
		scout, crm = newTracingAgent(), toolservers.NewCountingTool()
		DeferCleanup(scout.Close)
		DeferCleanup(crm.Close)
	})

	It("are exported by OTLP as one trace per run: the run, its steps, its model and tool calls, with GenAI attributes and no content, and the trace context passed to HTTP agents and tools", func() {
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", manifest("traced.yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: desk}
spec:
  entrypoint: scout
  toolServers:
  - {name: crm, http: {url: "%s", tool: file}}
  agents:
  - {name: scout, description: Looks the customer up, handoffs: [closer], model: {provider: HTTP, endpoint: "%s"}}
  - name: closer
    terminator: true
    tools: [{server: crm}]
    script:
    - {output: "closing", signal: DONE, tokens: 15, toolCalls: [{server: crm, tool: file, arguments: {note: "secret-note-42"}}]}
  signals: [{name: DONE, action: Terminate}]
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentRun
metadata: {name: ticket-77}
spec: {configRef: {name: desk}, input: "Ticket 77: the customer's password is hunter2"}
`, crm.URL, scout.URL)))
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=120s", "agentrun/ticket-77")
		traceID := strings.ReplaceAll(jsonpath("agentrun", "ticket-77", ns, "{.metadata.uid}"), "-", "")

		var spans []span
		byName := map[string][]span{}
		Eventually(func(g Gomega) {
			spans = spansOf(traceID)
			byName = map[string][]span{}
			for _, s := range spans {
				byName[s.Name] = append(byName[s.Name], s)
			}
			g.Expect(byName).To(HaveKey("invoke_workflow desk"), "the run's span comes once the run ended")
			g.Expect(byName).To(HaveKey("execute_tool file"))
		}, "30s", "200ms").Should(Succeed())

		By("one trace per run, its ID the run's UID, the run's span at its root")
		Expect(byName["invoke_workflow desk"]).To(HaveLen(1))
		run := byName["invoke_workflow desk"][0]
		Expect(run.ParentSpanID).To(BeEmpty())
		Expect(run.Kind).To(Equal(kindInternal))
		Expect(run.attr("gen_ai.operation.name")).To(Equal("invoke_workflow"))
		Expect(run.attr("gen_ai.workflow.name")).To(Equal("desk"))
		Expect(run.attr("gen_ai.conversation.id")).To(Equal(jsonpath("agentrun", "ticket-77", ns, "{.metadata.uid}")))
		Expect(run.attr("baton.termination.reason")).To(Equal("Terminated"))

		By("a span per step, children of the run's")
		Expect(byName["invoke_agent scout"]).To(HaveLen(1))
		Expect(byName["invoke_agent closer"]).To(HaveLen(1))
		scoutSpan, closer := byName["invoke_agent scout"][0], byName["invoke_agent closer"][0]
		for _, s := range []span{scoutSpan, closer} {
			Expect(s.ParentSpanID).To(Equal(run.SpanID), s.Name)
			Expect(s.attr("gen_ai.operation.name")).To(Equal("invoke_agent"), s.Name)
			Expect(s.attr("gen_ai.conversation.id")).To(Equal(run.attr("gen_ai.conversation.id")), s.Name)
		}
		Expect(scoutSpan.Kind).To(Equal(kindClient), "an HTTP agent is a remote agent")
		Expect(scoutSpan.attr("gen_ai.agent.name")).To(Equal("scout"))
		Expect(scoutSpan.attr("gen_ai.agent.description")).To(Equal("Looks the customer up"))
		Expect(scoutSpan.attr("gen_ai.provider.name")).To(Equal("baton.http_agent"))
		Expect(scoutSpan.attr("gen_ai.usage.input_tokens")).To(Equal("20"))
		Expect(scoutSpan.attr("gen_ai.usage.output_tokens")).To(Equal("10"))
		Expect(scoutSpan.attr("baton.step")).To(Equal("1"))
		Expect(closer.Kind).To(Equal(kindInternal))
		Expect(closer.attr("gen_ai.usage.output_tokens")).To(Equal("15"))

		By("a chat span per model call and an execute_tool span per tool call, inside their step's")
		Expect(byName["chat"]).To(HaveLen(2), "the Scripted closer asked once for its tool call, once for its answer")
		for _, c := range byName["chat"] {
			Expect(c.ParentSpanID).To(Equal(closer.SpanID))
			Expect(c.Kind).To(Equal(kindClient))
			Expect(c.attr("gen_ai.operation.name")).To(Equal("chat"))
			Expect(c.attr("gen_ai.provider.name")).To(Equal("baton.scripted"))
		}
		tool := byName["execute_tool file"][0]
		Expect(tool.ParentSpanID).To(Equal(closer.SpanID))
		Expect(tool.attr("gen_ai.operation.name")).To(Equal("execute_tool"))
		Expect(tool.attr("gen_ai.tool.name")).To(Equal("file"))
		Expect(tool.attr("baton.tool.server")).To(Equal("crm"))

		By("no prompt, answer, argument or result on any span without --trace-content")
		raw, err := os.ReadFile(traceFile)
		Expect(err).NotTo(HaveOccurred())
		for _, s := range spans {
			for _, key := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
				Expect(s.attr(key)).To(BeEmpty(), "%s on %s", key, s.Name)
			}
		}
		Expect(string(raw)).NotTo(ContainSubstring("hunter2"), "the run's input")
		Expect(string(raw)).NotTo(ContainSubstring("secret-note-42"), "a tool call's arguments")
		Expect(string(raw)).NotTo(ContainSubstring("VPN profile is stale"), "an agent's answer")

		By("the W3C trace context passed on to the HTTP agent and the tool, in the run's trace")
		Expect(scout.traceparents()).To(HaveLen(1))
		Expect(scout.traceparents()[0]).To(MatchRegexp("^00-" + traceID + "-[0-9a-f]{16}-01$"))
		calls := crm.Calls()
		Expect(calls).To(HaveLen(1))
		Expect(calls[0].Header.Get("traceparent")).To(MatchRegexp("^00-" + traceID + "-[0-9a-f]{16}-01$"))
	})
})
