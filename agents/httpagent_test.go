package agents_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/httpagent"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	"github.com/baton-dev/baton/test/fakes"
)

func httpAgent(t *testing.T, server *fakes.HTTPAgent) (agents.Agent, agents.Request) {
	t.Helper()
	a, err := providers.New(agents.Dependencies{Secrets: secrets{"ns/agent-token/token": "tok-abcdef"}}).For(v1alpha1.ProviderHTTP)
	if err != nil {
		t.Fatal(err)
	}
	return a, agents.Request{
		Namespace: "ns", Run: "r", RunUID: "uid-7", Step: 3,
		Agent: v1alpha1.Agent{Name: "researcher", Description: "reads papers", Model: v1alpha1.ModelSpec{
			Provider: v1alpha1.ProviderHTTP, Endpoint: server.URL + "/step",
			APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "agent-token", Key: "token"}}},
		Task: "survey LLM loop detection", Input: "find 3 papers", Reason: "planner asked",
		Context: []workflow.ContextEntry{{Step: 2, From: "planner", Kind: workflow.ContextOutput, Text: "plan"}},
		Peers:   []agents.Peer{{Name: "writer", Description: "writes"}},
		Left:    workflow.Left{Steps: 10, Handoffs: 5, Tokens: 9000, Seconds: 120},
	}
}

func TestHTTPAgentSpeaksTheDocumentedJSON(t *testing.T) {
	server := fakes.NewHTTPAgent(fakes.HTTPAnswer{Body: map[string]any{
		"output": "3 papers found", "handoff": "writer", "reason": "ready to write", "tokens": 812, "finishReason": "stop",
	}})
	defer server.Close()
	a, req := httpAgent(t, server)
	res, err := step(t, a, req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := workflow.Result{Output: "3 papers found", Handoff: "writer", Reason: "ready to write", Tokens: 812, FinishReason: v1alpha1.FinishStop}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	call := server.Calls()[0]
	if call.Authorization != "Bearer tok-abcdef" || call.IdempotencyKey != httpagent.IdempotencyKey("uid-7", 3) {
		t.Fatalf("headers: %+v", call)
	}
	body := call.Body
	if body["task"] != "survey LLM loop detection" || body["input"] != "find 3 papers" || body["reason"] != "planner asked" ||
		body["step"] != float64(3) || body["run"].(map[string]any)["uid"] != "uid-7" ||
		body["limitsLeft"].(map[string]any)["steps"] != float64(10) || body["handoffs"].([]any)[0].(map[string]any)["name"] != "writer" {
		t.Fatalf("body: %v", body)
	}
}

func TestHTTPAgentIdempotencyKeys(t *testing.T) {
	server := fakes.NewHTTPAgent(
		fakes.HTTPAnswer{Status: http.StatusBadGateway, Body: map[string]any{"error": "upstream"}},
		fakes.HTTPAnswer{Body: map[string]any{"output": "done"}},
	)
	defer server.Close()
	a, req := httpAgent(t, server)
	if _, err := step(t, a, req, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	req.Step = 4
	if _, err := step(t, a, req, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	calls := server.Calls()
	if len(calls) != 3 || calls[0].IdempotencyKey != calls[1].IdempotencyKey || calls[1].IdempotencyKey == calls[2].IdempotencyKey {
		t.Fatalf("a retried step keeps its key and another step gets another: %+v", calls)
	}
}

func TestHTTPAgentErrorsSayWhatTheAgentAnswered(t *testing.T) {
	server := fakes.NewHTTPAgent(fakes.HTTPAnswer{Status: http.StatusBadRequest, Body: map[string]any{"error": "unknown field"}})
	defer server.Close()
	a, req := httpAgent(t, server)
	_, err := step(t, a, req, 5*time.Second)
	if err == nil || err.Error() != `the HTTP agent answered 400 Bad Request: {"error":"unknown field"}` || len(server.Calls()) != 1 {
		t.Fatalf("got %v after %d calls", err, len(server.Calls()))
	}
}

func TestMessagesSayWhatAnAgentSees(t *testing.T) {
	req := agents.Request{
		Agent: v1alpha1.Agent{Name: "crm", Description: "account history", Instructions: "Use the CRM."},
		Task:  "Review vendor Acme", Input: "Rejected at gate final by alice. Feedback: check disputes", Reason: "revision",
		Context: []workflow.ContextEntry{
			{Step: 4, From: "crm", Kind: workflow.ContextOutput, Text: "2 disputes"},
			{Step: 5, From: "alice", Kind: workflow.ContextFeedback, Text: "check disputes"},
		},
		Peers:   []agents.Peer{{Name: "analysis", Description: "compiles"}},
		Signals: []v1alpha1.Signal{{Name: "DONE", Description: "finished"}},
	}
	msgs := agents.Messages(req)
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = m.Role
	}
	if !cmp.Equal(roles, []string{"system", "user", "user", "user"}) {
		t.Fatalf("roles %v", roles)
	}
	for i, want := range []string{
		"Use the CRM.\n\nYou are the agent \"crm\" in a team of agents. Your role: account history\n\nTo hand the work to another agent, call its transfer tool with your reason:\n- analysis: compiles\n\nSignals you may emit, with emit_signal or on a line of their own:\n- DONE: finished",
		"Task:\nReview vendor Acme",
		"Earlier in this run, oldest first:\n\n[step 4] crm: 2 disputes\n\n[step 5] feedback from alice: check disputes",
		"You have control (revision). Your input:\nRejected at gate final by alice. Feedback: check disputes",
	} {
		if msgs[i].Content != want {
			t.Errorf("message %d:\n got %q\nwant %q", i, msgs[i].Content, want)
		}
	}
	if strings.Contains(agents.Messages(agents.Request{Task: "t", Input: "t"})[1].Content, "Your input") {
		t.Fatal("the task is not repeated as the input")
	}
}
