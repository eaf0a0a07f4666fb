package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/baton-dev/baton/test/toolservers"
)

// scrape reads the operator's /metrics over HTTPS with a bearer token, as Prometheus does.
func scrape(token string) (int, map[string]*dto.MetricFamily) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The operator's metrics certificate is self-signed outside a cluster.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed certificate on loopback
	}}
	req, err := http.NewRequest(http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, families
}

// sum adds up a family's counter values, or its histograms' counts, over the series whose labels
// include match.
func sum(families map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matched := true
		for k, v := range match {
			if labels[k] != v {
				matched = false
			}
		}
		if !matched {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

// runSummary is what the metrics are checked against: the runs as the API server holds them.
type runSummary struct {
	Items []struct {
		Metadata struct{ Name string }
		Status   struct {
			Phase             string
			TerminationReason string
			TokensUsed        int64
			StepCount         int32
			ToolCalls         int32
			Loop              *struct{ Detector string }
		}
	}
}

var _ = Describe("The operator's metrics", Ordered, func() {
	const ns = "metrics"
	var crm *toolservers.CountingTool
	BeforeAll(func() {
		crm = toolservers.NewCountingTool()
		DeferCleanup(crm.Close)
	})

	It("are served over HTTPS to whoever may get /metrics, and count runs, steps, tokens, guards, tools and approvals as the runs' status says", func() {
		kubectl("create", "namespace", ns)
		kubectl("apply", "-n", ns, "-f", manifest("metrics.yaml", fmt.Sprintf(`apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: desk}
spec:
  entrypoint: triage
  toolServers:
  - {name: crm, http: {url: "%s", tool: file}}
  agents:
  - name: triage
    handoffs: [closer]
    tools: [{server: crm}]
    script: [{output: "filed", handoff: closer, tokens: 120, toolCalls: [{server: crm, tool: file, arguments: {note: "t"}}]}]
  - {name: closer, terminator: true, script: [{output: "closed", signal: DONE, tokens: 30}]}
  signals: [{name: DONE, action: Terminate}]
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: pingpong}
spec:
  entrypoint: a
  agents:
  - {name: a, handoffs: [b], script: [{output: "to b", handoff: b, tokens: 10}]}
  - {name: b, handoffs: [a], script: [{output: "to a", handoff: a, tokens: 10}]}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: capped}
spec:
  entrypoint: a
  agents:
  - {name: a, handoffs: [b], script: [{output: "to b", handoff: b, tokens: 5}]}
  - {name: b, handoffs: [a], script: [{output: "to a", handoff: a, tokens: 5}]}
  limits: {maxSteps: 3}
  loopDetection: {allow: [{cycle: [a, b], maxRepeats: 10}]}
---
apiVersion: agents.baton.dev/v1alpha1
kind: AgentConfig
metadata: {name: gated}
spec:
  entrypoint: planner
  agents:
  - {name: planner, handoffs: [doer], script: [{output: "the plan", handoff: doer, tokens: 40}]}
  - {name: doer, terminator: true, script: [{output: "done", tokens: 60}]}
  approvals: [{name: plan, after: planner}]
`, crm.URL)))
		for _, run := range []struct{ name, config string }{
			{"desk-1", "desk"}, {"desk-2", "desk"}, {"loop-1", "pingpong"}, {"capped-1", "capped"}, {"gated-1", "gated"}, {"gated-2", "gated"},
			{"gated-3", "gated"},
		} {
			kubectl("apply", "-n", ns, "-f", manifest(run.name+".yaml", fmt.Sprintf(
				"apiVersion: agents.baton.dev/v1alpha1\nkind: AgentRun\nmetadata: {name: %s}\nspec: {configRef: {name: %s}, input: \"go\"}\n", run.name, run.config)))
		}
		kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=AwaitingApproval", "--timeout=60s", "agentrun/gated-1", "agentrun/gated-2", "agentrun/gated-3")
		// What is measured is time spent waiting: the three gates keep waiting for 2 s, the least
		// the wait metrics below count for each.
		Consistently(func() string {
			return kubectl("get", "-n", ns, "agentrun/gated-1", "agentrun/gated-2", "agentrun/gated-3", "-o", "jsonpath={.items[*].status.phase}")
		}, 2*time.Second, 500*time.Millisecond).Should(Equal("AwaitingApproval AwaitingApproval AwaitingApproval"))
		kubectl("annotate", "-n", ns, "agentrun/gated-1", "agents.baton.dev/approve=plan")
		kubectl("annotate", "-n", ns, "agentrun/gated-2", "agents.baton.dev/cancel=no longer needed")
		ended := []string{"agentrun/desk-1", "agentrun/desk-2", "agentrun/loop-1", "agentrun/capped-1", "agentrun/gated-1", "agentrun/gated-2"}
		kubectl(append([]string{"wait", "-n", ns, "--for=condition=Progressing=false", "--timeout=120s"}, ended...)...)

		var runs runSummary
		Expect(json.Unmarshal([]byte(kubectl("get", "agentruns", "-n", ns, "-o", "json")), &runs)).To(Succeed())
		reasons, guards := map[string]float64{}, map[string]float64{}
		var tokens, steps, calls float64
		guardReasons := map[string]bool{"Timeout": true, "TooManyErrors": true, "MaxStepsExceeded": true, "MaxHandoffsExceeded": true,
			"TokenBudgetExceeded": true, "AgentStepLimitExceeded": true, "ToolCallLimitExceeded": true}
		for _, r := range runs.Items {
			s := r.Status
			tokens += float64(s.TokensUsed)
			steps += float64(s.StepCount)
			calls += float64(s.ToolCalls)
			if r.Metadata.Name == "gated-3" {
				continue // still waiting at its gate
			}
			reasons[s.TerminationReason]++
			switch {
			case s.Loop != nil:
				guards[s.Loop.Detector]++
			case guardReasons[s.TerminationReason]:
				guards[s.TerminationReason]++
			}
		}
		// The runs ended as designed: two succeeded with a tool call each, a loop, a limit, an
		// approval and a cancel.
		Expect(reasons).To(Equal(map[string]float64{"Terminated": 2, "LoopDetected": 1, "MaxStepsExceeded": 1, "Completed": 1, "Cancelled": 1}))
		Expect(calls).To(BeEquivalentTo(2))

		By("refusing a scraper without a token, and one whose token may not get /metrics")
		code, _ := scrape("")
		Expect(code).To(Equal(http.StatusUnauthorized))
		kubectl("create", "serviceaccount", "-n", ns, "nobody")
		code, _ = scrape(strings.TrimSpace(kubectl("create", "token", "-n", ns, "nobody")))
		Expect(code).To(Equal(http.StatusForbidden))

		By("scraping as a ServiceAccount granted the shipped metrics-reader role")
		kubectl("apply", "-f", filepath.Join(root, "config", "rbac", "metrics_reader_role.yaml"))
		kubectl("create", "serviceaccount", "-n", ns, "prometheus")
		kubectl("create", "clusterrolebinding", "metrics-e2e", "--clusterrole=metrics-reader", "--serviceaccount="+ns+":prometheus")
		token := strings.TrimSpace(kubectl("create", "token", "-n", ns, "prometheus"))
		var families map[string]*dto.MetricFamily
		Eventually(func() int { code, families = scrape(token); return code }, "30s", "500ms").Should(Equal(http.StatusOK))

		in := map[string]string{"namespace": ns}
		for reason, n := range reasons {
			Expect(sum(families, "baton_agentruns_ended_total", map[string]string{"namespace": ns, "reason": reason})).To(Equal(n), reason)
			Expect(sum(families, "baton_agentrun_duration_seconds", map[string]string{"namespace": ns, "reason": reason})).To(Equal(n), reason)
		}
		Expect(sum(families, "baton_agentruns_ended_total", in)).To(BeEquivalentTo(len(runs.Items) - 1))
		for guard, n := range guards {
			Expect(sum(families, "baton_guard_trips_total", map[string]string{"namespace": ns, "guard": guard})).To(Equal(n), guard)
		}
		Expect(sum(families, "baton_guard_trips_total", in)).To(BeEquivalentTo(2), "a loop detector and a limit ended runs; nothing else is a guard")
		Expect(sum(families, "baton_agent_tokens_total", in)).To(Equal(tokens), "tokens counted as the runs' status counts them")
		Expect(sum(families, "baton_agent_tokens_total", map[string]string{"namespace": ns, "config": "desk", "agent": "triage", "model": "Scripted", "type": "output"})).
			To(BeEquivalentTo(240), "Scripted agents report only a total, counted as output")
		Expect(sum(families, "baton_agent_steps_total", in)).To(Equal(steps))
		Expect(sum(families, "baton_agent_steps_total", map[string]string{"namespace": ns, "result": "ok", "provider": "Scripted"})).To(Equal(steps))
		Expect(sum(families, "baton_tool_calls_total", map[string]string{"namespace": ns, "server": "crm", "tool": "file", "result": "ok"})).To(Equal(calls))
		Expect(sum(families, "baton_approval_wait_seconds", map[string]string{"namespace": ns, "config": "gated", "gate": "plan"})).
			To(BeEquivalentTo(2), "one approved, one cancelled while it waited")
		wait := families["baton_approval_wait_seconds"]
		for _, m := range wait.GetMetric() {
			if labelOf(m, "namespace") == ns {
				Expect(m.GetHistogram().GetSampleSum()).To(BeNumerically(">=", 4), "each gate waited at least 2s")
			}
		}
		Expect(sum(families, "baton_agent_step_duration_seconds", map[string]string{"provider": "Scripted"})).To(BeNumerically(">=", steps))
		gate := map[string]string{"namespace": ns, "config": "gated", "gate": "plan"}
		Expect(sum(families, "baton_approvals_waiting", gate)).To(BeEquivalentTo(1), "gated-3 waits at its gate")
		Expect(sum(families, "baton_approval_oldest_wait_seconds", gate)).To(BeNumerically(">=", 2))
		Expect(sum(families, "baton_approvals_overdue", gate)).To(BeZero(), "the gate has no timeout")
		Expect(sum(families, "baton_transcript_write_seconds", nil)).To(BeNumerically(">", 0))
		for _, f := range families {
			if strings.HasPrefix(f.GetName(), "baton_") {
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						Expect(l.GetName()).NotTo(BeElementOf("run", "name", "uid"), "a run in the labels of %s", f.GetName())
						Expect(l.GetValue()).NotTo(HavePrefix("desk-"), "a run's name in %s", f.GetName())
					}
				}
			}
		}
	})
})

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
