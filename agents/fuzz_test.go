package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// FuzzProviderAnswers serves random bodies as a model server's and an HTTP agent's answers, on
// loopback, and applies whatever the providers make of them: the step fails or succeeds, but
// the status that follows holds what the API requires: tokens never go down, a routing
// confidence is within [0, 1], the key appears nowhere, and the status fits its budget.
func FuzzProviderAnswers(f *testing.F) {
	for _, seed := range []string{
		`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"total_tokens":-2000000}}`,
		`{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"route","arguments":"{\"target\":\"b\",\"confidence\":1e308}"}}]}}]}`,
		`{"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"<script>` + key + `</script>"}}],"usage":{"total_tokens":9223372036854775807}}`,
		`{"output":"` + strings.Repeat("🙂", 3000) + `","handoff":"b","tokens":-5,"routing":{"target":"b","confidence":-3}}`,
		`{"output":"x","signal":"` + strings.Repeat("\\u0000", 500) + `","finishReason":"weird"}`,
		`{"output":"x","parallel":[{"agent":"a","input":"` + key + `"},{"agent":"` + strings.Repeat("b", 300) + `"}],"tokens":7}`,
		`{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"fan_out","arguments":"{\"branches\":[{\"agent\":\"b\"}]}"}}]}}]}`,
		`[]`, `null`, `{"choices":[]}`, "\xff\xfe",
	} {
		f.Add([]byte(seed))
	}
	// One server and one set of providers for every input, so that connections are reused: a
	// server per input leaves tens of thousands of sockets in TIME_WAIT and runs the machine
	// out of ports.
	var mu sync.Mutex
	var answer []byte
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		body := answer
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer server.Close()
	providers := providers.New(agents.Dependencies{Secrets: secrets{"ns/llm/apiKey": key}})
	f.Fuzz(func(t *testing.T, body []byte) {
		mu.Lock()
		answer = body
		mu.Unlock()
		plan := fuzzPlan(t, server.URL)
		now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
		st := workflow.Start(plan, v1alpha1.AgentRunStatus{}, "task", "rev", now).Status
		for range 3 {
			if st.Phase != v1alpha1.PhaseRunning {
				break
			}
			res := takeFuzzStep(t, providers, plan, &st)
			before := st.TokensUsed
			st = workflow.Apply(plan, st, res, now).Status
			workflow.FitStatus(&st)
			checkFuzzStatus(t, st, before)
		}
	})
}

// fuzzPlan is a supervisor over an OpenAI agent and an HTTP agent, both answered by the server
// at url, both given the key.
func fuzzPlan(t *testing.T, url string) *workflow.Plan {
	t.Helper()
	spec := MakeConfig("fuzz", "ns").Mode(v1alpha1.ModeSupervisor).Agents(
		MakeAgent("a").Provider(v1alpha1.ProviderOpenAI).HandsOffTo("b"),
		MakeAgent("b").Provider(v1alpha1.ProviderHTTP).HandsOffTo("a")).Obj().Spec
	spec.Agents[0].Model.Name, spec.Agents[0].Model.Endpoint = "m", url
	spec.Agents[1].Model.Endpoint = url
	spec.Routing = &v1alpha1.Routing{Supervisor: "a"}
	for i := range spec.Agents {
		spec.Agents[i].Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}
	}
	plan, errs := workflow.NewPlan(spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return plan
}

// takeFuzzStep asks the provider of the run's next agent for its step, and returns what it
// answered or the error it failed with.
func takeFuzzStep(t *testing.T, ps *agents.Providers, plan *workflow.Plan, st *v1alpha1.AgentRunStatus) workflow.StepResult {
	t.Helper()
	step := workflow.Next(plan, st)
	a, err := ps.For(plan.Agent(step.Agent).Model.Provider)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res := workflow.StepResult{Agent: step.Agent, Input: step.Input}
	answer, err := a.Step(ctx, &agents.Request{Namespace: "ns", Run: "r", RunUID: "u", Step: step.Number,
		Agent: *plan.Agent(step.Agent), Input: step.Input, Children: []agents.Peer{{Name: "b"}}})
	if answer != nil {
		res.Result = *answer
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// checkFuzzStatus fails the test when the status breaks what the API requires, whatever the
// servers answered.
func checkFuzzStatus(t *testing.T, st v1alpha1.AgentRunStatus, tokensBefore int64) {
	t.Helper()
	data, _ := json.Marshal(st)
	switch {
	case st.TokensUsed < tokensBefore:
		t.Fatalf("tokens went down from %d to %d", tokensBefore, st.TokensUsed)
	case strings.Contains(string(data), key):
		t.Fatalf("the key is in the status: %s", data)
	case len(data) > workflow.StatusBudget:
		t.Fatalf("the status takes %d bytes", len(data))
	}
	for _, r := range st.HandoffSequence {
		if c := r.Confidence; c != nil && (*c < 0 || *c > 1) {
			t.Fatalf("confidence %v in the handoff sequence", *c)
		}
	}
}
