package agents_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/a2aagent"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/workflow"
	"github.com/baton-dev/baton/test/a2aagents"
)

// reports keeps what a step's agent reported.
type reports struct {
	mu   sync.Mutex
	said []string
}

func (r *reports) Report(_ context.Context, state, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.said = append(r.said, state+": "+text)
}

func a2aStep(t *testing.T, deps agents.Dependencies, agent *a2aagents.Agent, mod func(*agents.Request)) (*workflow.Result, error) {
	t.Helper()
	if deps.Secrets == nil {
		deps.Secrets = secrets{"ns/llm/apiKey": apiKey}
	}
	a, err := providers.New(deps).For(v1alpha1.ProviderA2A)
	if err != nil {
		t.Fatal(err)
	}
	req := &agents.Request{Namespace: "ns", Run: "ticket", RunUID: "uid-1", Step: 3,
		Agent: v1alpha1.Agent{Name: "researcher", Model: v1alpha1.ModelSpec{Provider: v1alpha1.ProviderA2A, Endpoint: agent.URL}},
		Task:  "Ticket 7: VPN drops", Input: "find the VPN gateway's logs",
		Peers: []agents.Peer{{Name: "writer"}}, Signals: []v1alpha1.Signal{{Name: "DONE", Action: v1alpha1.ActionComplete}},
		Context: []workflow.ContextEntry{{Step: 2, From: "triage", Kind: workflow.ContextOutput, Text: "a VPN ticket"}}}
	if mod != nil {
		mod(req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return a.Step(ctx, req)
}

func TestAnA2AStepIsOneMessageInTheRunsContextAndItsAnswerIsTheArtifact(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{}, func(*a2a.Message, *a2a.Task) a2aagents.Turn {
		return a2aagents.Turn{Text: "the gateway restarts at 02:00\nHANDOFF: writer\nREASON: write it up"}
	})
	defer agent.Close()
	res, err := a2aStep(t, agents.Dependencies{}, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "the gateway restarts at 02:00" || res.Handoff != "writer" || res.Reason != "write it up" {
		t.Errorf("result %+v", res)
	}
	got := agent.Received()
	if len(got) != 1 {
		t.Fatalf("%d messages sent, want 1", len(got))
	}
	m := got[0].Message
	if m.ID != a2aagent.MessageID("uid-1", 3) || m.ContextID != a2aagent.ContextID("uid-1") || m.Parts[0].Text() != "find the VPN gateway's logs" {
		t.Errorf("message id %q, context %q, text %q", m.ID, m.ContextID, m.Parts[0].Text())
	}
	step, _ := m.Metadata[a2aagent.MetadataKey].(map[string]any)
	if step["task"] != "Ticket 7: VPN drops" || step["step"] != float64(3) || !strings.Contains(toJSON(t, step["context"]), "a VPN ticket") {
		t.Errorf("the message's metadata says %v", m.Metadata)
	}
}

func TestAnA2AAgentsQuestionWaitsForInputAndTheReplyContinuesTheSameTask(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{}, func(msg *a2a.Message, task *a2a.Task) a2aagents.Turn {
		if task == nil {
			return a2aagents.Turn{State: a2a.TaskStateInputRequired, Text: "Which region?"}
		}
		return a2aagents.Turn{Text: "logs of " + msg.Parts[0].Text() + " attached"}
	})
	defer agent.Close()
	asked, err := a2aStep(t, agents.Dependencies{}, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !asked.InputRequired || asked.Output != "Which region?" || asked.RemoteTask == "" {
		t.Fatalf("result %+v", asked)
	}
	answered, err := a2aStep(t, agents.Dependencies{}, agent, func(r *agents.Request) {
		r.Step, r.Input, r.RemoteTask = 4, "eu-west", asked.RemoteTask
	})
	if err != nil {
		t.Fatal(err)
	}
	if answered.Output != "logs of eu-west attached" || answered.InputRequired {
		t.Errorf("result %+v", answered)
	}
	got := agent.Received()
	if len(got) != 2 || got[1].TaskID != asked.RemoteTask || got[1].Message.ContextID != a2aagent.ContextID("uid-1") {
		t.Errorf("the reply ran in task %q, want %q", got[len(got)-1].TaskID, asked.RemoteTask)
	}
}

func TestAnA2ATaskThatFailsIsAStepErrorWithTheAgentsWords(t *testing.T) {
	for state, want := range map[a2a.TaskState]string{
		a2a.TaskStateFailed:       "is failed: the gateway is unreachable",
		a2a.TaskStateRejected:     "is rejected: the gateway is unreachable",
		a2a.TaskStateAuthRequired: "needs authorization Baton cannot give: the gateway is unreachable",
	} {
		agent := a2aagents.Start(a2aagents.Options{}, func(*a2a.Message, *a2a.Task) a2aagents.Turn {
			return a2aagents.Turn{State: state, Text: "the gateway is unreachable"}
		})
		_, err := a2aStep(t, agents.Dependencies{}, agent, nil)
		agent.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", state, err, want)
		}
	}
}

func TestAStreamingA2AAgentsProgressIsReportedAndItsDataPartIsTheStructuredAnswer(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{Streaming: true}, func(*a2a.Message, *a2a.Task) a2aagents.Turn {
		return a2aagents.Turn{Progress: []string{"reading logs", "found 3 restarts"},
			Data: map[string]any{"restarts": 3}}
	})
	defer agent.Close()
	var r reports
	res, err := a2aStep(t, agents.Dependencies{}, agent, func(req *agents.Request) {
		req.Updates = &r
		req.Agent.OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != `{"restarts":3}` {
		t.Errorf("output %q", res.Output)
	}
	if strings.Join(r.said, "|") != "TASK_STATE_WORKING: reading logs|TASK_STATE_WORKING: found 3 restarts" {
		t.Errorf("reported %q", r.said)
	}
}

func TestAnA2AAnswersDataPartSaysWhereItGoes(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{}, func(*a2a.Message, *a2a.Task) a2aagents.Turn {
		return a2aagents.Turn{Message: true, Text: "done here", Data: map[string]any{"baton": map[string]any{"signal": "DONE", "tokens": 120}}}
	})
	defer agent.Close()
	res, err := a2aStep(t, agents.Dependencies{}, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "done here" || res.Signal != "DONE" || res.Tokens != 120 {
		t.Errorf("result %+v", res)
	}
}

func TestAnA2AAgentThatSpeaksOnly03IsSpokenTo(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{V03Only: true, Streaming: true}, func(msg *a2a.Message, _ *a2a.Task) a2aagents.Turn {
		return a2aagents.Turn{Text: "0.3 says: " + msg.Parts[0].Text()}
	})
	defer agent.Close()
	res, err := a2aStep(t, agents.Dependencies{}, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "0.3 says: find the VPN gateway's logs" {
		t.Errorf("output %q", res.Output)
	}
	if got := agent.Received(); len(got) != 1 || got[0].Message.ID != a2aagent.MessageID("uid-1", 3) {
		t.Errorf("received %+v", got)
	}
}

func TestAnA2AAgentsKeyIsSentAsABearerTokenAndItsCallsGoThroughTheEgressPolicy(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{}, func(*a2a.Message, *a2a.Task) a2aagents.Turn { return a2aagents.Turn{Text: "ok"} })
	defer agent.Close()
	withKey := func(r *agents.Request) {
		r.Agent.Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}
	}
	if _, err := a2aStep(t, agents.Dependencies{}, agent, withKey); err != nil {
		t.Fatal(err)
	}
	if got := agent.Received()[0].Header.Get("Authorization"); got != "Bearer "+apiKey {
		t.Errorf("authorization %q", got)
	}
	_, err := a2aStep(t, agents.Dependencies{HTTPClient: egress.Default().Client()}, agent, nil)
	if err == nil || !strings.Contains(err.Error(), "egress policy refuses 127.0.0.1") {
		t.Errorf("error %v, want the egress policy's refusal", err)
	}
	if len(agent.Received()) != 1 {
		t.Errorf("the refused step reached the agent")
	}
}

// seen is an HTTP client's transport that notes the path of every request it carries.
type seen struct {
	mu    sync.Mutex
	paths []string
}

func (s *seen) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (s *seen) saw(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.paths, func(p string) bool { return strings.HasPrefix(p, prefix) })
}

// A card chooses how the agent is called, not with what: an agent that offers only A2A's
// HTTP+JSON binding is called through the operator's client (the egress policy's), as a
// JSON-RPC one is, never through a client of the SDK's own.
func TestEveryA2ABindingACardNamesIsCalledThroughTheOperatorsClient(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{RESTOnly: true}, func(*a2a.Message, *a2a.Task) a2aagents.Turn { return a2aagents.Turn{Text: "over REST"} })
	defer agent.Close()
	transport := &seen{}
	res, err := a2aStep(t, agents.Dependencies{HTTPClient: &http.Client{Transport: transport}}, agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "over REST" || !transport.saw("/rest/") {
		t.Errorf("output %q; the operator's client carried %v", res.Output, transport.paths)
	}
	_, err = a2aStep(t, agents.Dependencies{HTTPClient: egress.Default().Client()}, agent, nil)
	if err == nil || !strings.Contains(err.Error(), "egress policy refuses 127.0.0.1") {
		t.Errorf("error %v, want the egress policy's refusal", err)
	}
}

// The agent's key goes to the origin of its endpoint only: a card served there may name
// another address for its messages, which is called without the key.
func TestAnA2AAgentsKeyIsNotSentToAnotherOriginItsCardNames(t *testing.T) {
	agent := a2aagents.Start(a2aagents.Options{}, func(*a2a.Message, *a2a.Task) a2aagents.Turn { return a2aagents.Turn{Text: "ok"} })
	defer agent.Close()
	resp, err := http.Get(agent.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	card, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The card, served from elsewhere, still names the agent's own address.
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(card)
	}))
	defer elsewhere.Close()
	_, err = a2aStep(t, agents.Dependencies{}, agent, func(r *agents.Request) {
		r.Agent.Model.Endpoint = elsewhere.URL
		r.Agent.Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := agent.Received()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("the agent at another origin than the endpoint was sent %q", got)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
