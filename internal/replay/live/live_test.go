package live_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/replay/live"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

var t0 = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// helpdesk is triage, which hands off to a resolver that looks customers up in the CRM; both
// on an OpenAI-compatible server.
func helpdesk(t *testing.T, server *fakes.OpenAI) *workflow.Plan {
	return helpdeskOn(t, v1alpha1.ModelSpec{Provider: v1alpha1.ProviderOpenAI, Name: "gpt-4o-mini", Endpoint: server.BaseURL(),
		APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}})
}

// helpdeskOn is the helpdesk with each agent on model.
func helpdeskOn(t *testing.T, model v1alpha1.ModelSpec) *workflow.Plan {
	t.Helper()
	cfg := MakeConfig("helpdesk", "ns").MCPServer("crm", "http://crm.invalid/mcp").Agents(
		MakeAgent("triage").HandsOffTo("resolver"),
		MakeAgent("resolver").Terminator().Tools(Uses("crm").Allow("lookup")),
	).Obj()
	for i := range cfg.Spec.Agents {
		cfg.Spec.Agents[i].Model = model
	}
	p, errs := workflow.NewPlan(cfg.Spec, nil)
	if len(errs) > 0 {
		t.Fatalf("NewPlan: %v", errs)
	}
	return p.ForRun("ticket", "ns", "", "alice")
}

// recorded is a run of which the recording holds only triage's turn, and a CRM lookup an
// earlier step made.
func recorded(t *testing.T, p *workflow.Plan) replay.Recording {
	t.Helper()
	rec := replay.Recording{Run: "ticket", Input: "Ticket 7: I was charged twice", Started: t0, Revision: "helpdesk-1"}
	st := workflow.Start(p, v1alpha1.AgentRunStatus{}, rec.Input, rec.Revision, t0).Status
	res := workflow.StepResult{Agent: "triage", Input: rec.Input, Result: workflow.Result{Output: "a double charge", Handoff: "resolver", Tokens: 40}}
	rec.Steps = []workflow.RecordedStep{{Result: res, Time: t0.Add(time.Second)}}
	rec.End = workflow.Apply(p, st, res, t0.Add(time.Second)).Status
	rec.Path = rec.End.HandoffSequence
	rec.ToolResults = []replay.ToolResult{{Agent: "resolver",
		Call:    workflow.ToolCall{Server: "crm", Tool: "lookup", Arguments: json.RawMessage(`{"ticket": 7}`)},
		Outcome: workflow.ToolOutcome{Content: "customer 7: gold, two charges on 2026-11-20"}}}
	return rec
}

func loopback(t *testing.T) *egress.Policy {
	t.Helper()
	p, err := egress.New([]string{"127.0.0.1/32"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestALiveTurnIsAskedAsTheOperatorWouldAndAnsweredFromTheRecordedTools(t *testing.T) {
	t.Setenv(live.EnvName("llm", "apiKey"), "sk-live-test")
	server := fakes.NewOpenAI()
	defer server.Close()
	server.ReplyTo("resolver",
		fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "crm__lookup", Args: `{"ticket":7}`}}, Tokens: 30},
		fakes.Reply{Content: "refunded the second charge", Tokens: 50})
	p := helpdesk(t, server)
	rec := recorded(t, p)

	caller := live.NewCaller(live.Setup{HTTPClient: loopback(t).Client()}, p, rec, "ns", "uid-1")
	r := replay.Run(p, rec, replay.Options{Live: caller.Live(context.Background())})

	if r.Stopped != "" || r.Replayed.Reason != v1alpha1.ReasonCompleted || r.Replayed.Output != "refunded the second charge" {
		t.Fatalf("replayed %+v, stopped %q", r.Replayed, r.Stopped)
	}
	if len(r.Live) != 1 || r.Live[0] != 2 || r.Replayed.Tokens != 40+30+50 {
		t.Errorf("live steps %v, tokens %d", r.Live, r.Replayed.Tokens)
	}
	reqs := server.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model server was called %d times, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-live-test" {
		t.Errorf("the key sent was %q, want the one from the environment", got)
	}
	if said := said(reqs[0]); !strings.Contains(said, "a double charge") || !strings.Contains(said, "Ticket 7: I was charged twice") {
		t.Errorf("the live turn was not shown the run's input and triage's output: %s", said)
	}
	if names := reqs[0].ToolNames(); len(names) != 1 || names[0] != "crm__lookup" {
		t.Errorf("offered tools %v, want the recorded crm__lookup", names)
	}
	results := reqs[1].ToolResults()
	if len(results) != 1 || results[0].Content != "customer 7: gold, two charges on 2026-11-20" {
		t.Errorf("the tool call was answered with %+v, want the recorded result", results)
	}
}

// said is what a request's messages say.
func said(r fakes.ChatRequest) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

func TestALiveToolCallNothingRecordedStopsTheReplay(t *testing.T) {
	t.Setenv(live.EnvName("llm", "apiKey"), "sk-live-test")
	server := fakes.NewOpenAI()
	defer server.Close()
	server.ReplyTo("resolver", fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "crm__lookup", Args: `{"ticket":8}`}}})
	p := helpdesk(t, server)
	rec := recorded(t, p)
	r := replay.Run(p, rec, replay.Options{Live: live.NewCaller(live.Setup{HTTPClient: loopback(t).Client()}, p, rec, "ns", "uid-1").Live(context.Background())})
	if !strings.Contains(r.Stopped, "calls crm/lookup with arguments the recorded run never used") || len(r.Live) != 0 {
		t.Errorf("stopped %q, live %v", r.Stopped, r.Live)
	}
}

func TestALiveTurnGoesThroughTheEgressPolicy(t *testing.T) {
	t.Setenv(live.EnvName("llm", "apiKey"), "sk-live-test")
	server := fakes.NewOpenAI()
	defer server.Close()
	p := helpdesk(t, server)
	rec := recorded(t, p)
	r := replay.Run(p, rec, replay.Options{Live: live.NewCaller(live.Setup{HTTPClient: egress.Default().Client()}, p, rec, "ns", "uid-1").Live(context.Background())})
	if !strings.Contains(r.Stopped, "egress policy refuses 127.0.0.1 (loopback)") || len(server.Requests()) != 0 {
		t.Errorf("stopped %q after %d requests reached the loopback server; replayed %+v", r.Stopped, len(server.Requests()), r.Replayed)
	}
}

func TestALiveTurnWithoutAKeySaysWhereToPutIt(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	p := helpdesk(t, server)
	rec := recorded(t, p)
	r := replay.Run(p, rec, replay.Options{Live: live.NewCaller(live.Setup{HTTPClient: loopback(t).Client()}, p, rec, "ns", "uid-1").Live(context.Background())})
	if !strings.Contains(r.Stopped, "BATON_SECRET_LLM_APIKEY") || len(server.Requests()) != 0 {
		t.Errorf("stopped %q", r.Stopped)
	}
}

// priced resolves every endpoint reference to the fake server, at a price.
type priced struct{ url string }

func (p priced) Resolve(context.Context, string, *v1alpha1.EndpointReference) (*endpoints.Endpoint, error) {
	table, err := cost.NewTable("USD", []cost.ModelPrice{{Model: "gpt-4o-mini", Input: "1", Output: "2"}})
	return &endpoints.Endpoint{Provider: v1alpha1.ProviderOpenAI, URL: p.url, Prices: table,
		Secret: &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}}, err
}

func TestALiveTurnOnAPricedEndpointCostsWhatItsCallsCost(t *testing.T) {
	t.Setenv(live.EnvName("llm", "apiKey"), "sk-live-test")
	server := fakes.NewOpenAI()
	defer server.Close()
	server.ReplyTo("resolver", fakes.Reply{Content: "refunded", Tokens: 3_000_000, PromptTokens: 2_000_000})
	p := helpdeskOn(t, v1alpha1.ModelSpec{Name: "gpt-4o-mini", EndpointRef: &v1alpha1.EndpointReference{Name: "openai"}})
	rec := recorded(t, p)
	caller := live.NewCaller(live.Setup{HTTPClient: loopback(t).Client()}, p, rec, "ns", "uid-1")
	caller.Endpoints = priced{url: server.BaseURL()}
	r := replay.Run(p, rec, replay.Options{Live: caller.Live(context.Background())})
	// 2M prompt tokens at 1 per million, 1M completion tokens at 2 per million.
	if r.Stopped != "" || r.Replayed.Cost != "4" {
		t.Errorf("cost %q, stopped %q", r.Replayed.Cost, r.Stopped)
	}
}

// A live turn's calls go through the operator's guards: the same call asked for again, past
// the repeated-call detector, ends the replayed run as it would have ended the run.
func TestALiveTurnsCallsGoThroughTheRunsGuards(t *testing.T) {
	t.Setenv(live.EnvName("llm", "apiKey"), "sk-live-test")
	server := fakes.NewOpenAI()
	defer server.Close()
	lookup := fakes.ToolCall{Name: "crm__lookup", Args: `{"ticket":7}`}
	server.ReplyTo("resolver",
		fakes.Reply{ToolCalls: []fakes.ToolCall{lookup}, Tokens: 30},
		fakes.Reply{ToolCalls: []fakes.ToolCall{lookup}, Tokens: 30},
		fakes.Reply{Content: "refunded", Tokens: 50})
	cfg := MakeConfig("helpdesk", "ns").MCPServer("crm", "http://crm.invalid/mcp").MaxRepeatedToolCalls(1).Agents(
		MakeAgent("triage").HandsOffTo("resolver"),
		MakeAgent("resolver").Terminator().Tools(Uses("crm").Allow("lookup")),
	).Obj()
	for i := range cfg.Spec.Agents {
		cfg.Spec.Agents[i].Model = v1alpha1.ModelSpec{Provider: v1alpha1.ProviderOpenAI, Name: "gpt-4o-mini", Endpoint: server.BaseURL(),
			APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}}
	}
	p, errs := workflow.NewPlan(cfg.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p = p.ForRun("ticket", "ns", "", "alice")
	rec := recorded(t, p)
	caller := live.NewCaller(live.Setup{HTTPClient: loopback(t).Client()}, p, rec, "ns", "uid-1")
	r := replay.Run(p, rec, replay.Options{Live: caller.Live(context.Background())})
	if r.Replayed.Reason != v1alpha1.ReasonLoopDetected || r.Stopped != "" {
		t.Fatalf("replayed %s (%s), stopped %q", r.Replayed.Reason, r.Replayed.Message, r.Stopped)
	}
}

// A key is read from a Secret only when the Secret is labelled for agents, as the operator
// reads keys: an export, or a config, cannot name any Secret the user may read and have it sent.
func TestALiveTurnsKeyIsReadOnlyFromASecretLabelledForAgents(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := func(name string, labelled bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{"apiKey": []byte("sk-" + name)}}
		if labelled {
			s.Labels = map[string]string{v1alpha1.LabelAPIKey: "true"}
		}
		return s
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret("llm", true), secret("db-creds", false)).Build()
	s := live.Secrets{Reader: c, Getenv: func(string) string { return "" }}
	if key, err := s.SecretKey(context.Background(), "ns", "llm", "apiKey"); err != nil || key != "sk-llm" {
		t.Errorf("a labelled Secret: %q, %v", key, err)
	}
	if key, err := s.SecretKey(context.Background(), "ns", "db-creds", "apiKey"); err == nil || key != "" || !strings.Contains(err.Error(), "ns/db-creds is not labelled agents.baton.dev/api-key=true") {
		t.Errorf("an unlabelled Secret: %q, %v", key, err)
	}
}
