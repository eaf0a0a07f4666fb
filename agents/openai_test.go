package agents_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	"github.com/baton-dev/baton/test/fakes"
)

const apiKey = "sk-test-0123456789abcdef"

// secrets holds one Secret, llm with key apiKey, in namespace ns.
type secrets map[string]string

func (s secrets) SecretKey(_ context.Context, namespace, name, key string) (string, error) {
	if v, ok := s[namespace+"/"+name+"/"+key]; ok {
		return v, nil
	}
	return "", fmt.Errorf("Secret %s (for the API key) does not exist in namespace %s", name, namespace)
}

func openAIAgent(t *testing.T, server *fakes.OpenAI) (agents.Agent, agents.Request) {
	t.Helper()
	p := providers.New(agents.Dependencies{Secrets: secrets{"ns/llm/apiKey": apiKey}})
	a, err := p.For(v1alpha1.ProviderOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	req := agents.Request{
		Namespace: "ns", Run: "r", RunUID: "uid-1", Step: 1,
		Agent: v1alpha1.Agent{Name: "triage", Description: "routes tickets", Instructions: "Be brief.", Model: v1alpha1.ModelSpec{
			Provider: v1alpha1.ProviderOpenAI, Name: "gpt-4o-mini", Endpoint: server.BaseURL(),
			APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}, MaxOutputTokens: ptr.To[int32](256), Temperature: ptr.To(0.2),
		}},
		Task:    "Ticket 7: VPN drops",
		Input:   "Ticket 7: VPN drops",
		Peers:   []agents.Peer{{Name: "network-team", Description: "VPN and DNS"}, {Name: "billing", Description: "invoices"}},
		Signals: []v1alpha1.Signal{{Name: "DONE", Action: v1alpha1.ActionComplete, Description: "the ticket is closed"}},
	}
	return a, req
}

func step(t *testing.T, a agents.Agent, req agents.Request, timeout time.Duration) (workflow.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := a.Step(ctx, &req)
	if res == nil {
		return workflow.Result{}, err
	}
	return *res, err
}

func TestOpenAIToolCallsBecomeHandoffsSignalsAndRoutes(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := openAIAgent(t, server)

	server.Reply(fakes.Reply{Content: "sending to network", Tokens: 321, ToolCalls: []fakes.ToolCall{
		{Name: "transfer_to_network_team", Args: `{"reason":"VPN issue"}`},
		{Name: "emit_signal", Args: `{"signal":"DONE"}`},
		{Name: "transfer_to_billing", Args: `{}`},
	}})
	res, err := step(t, a, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := workflow.Result{Output: "sending to network", Handoff: "network-team", Reason: "VPN issue", Tokens: 321, InputTokens: 160,
		FinishReason: v1alpha1.FinishStop, Ignored: []string{"emit_signal", "transfer_to_billing"}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	sent := server.Requests()[0]
	if got := sent.ToolNames(); !cmp.Equal(got, []string{"transfer_to_network_team", "transfer_to_billing", "emit_signal"}) {
		t.Fatalf("tools offered: %v", got)
	}
	if sent.Model != "gpt-4o-mini" || sent.MaxCompletionTokens != 256 || *sent.Temperature != 0.2 ||
		sent.Header.Get("Authorization") != "Bearer "+apiKey {
		t.Fatalf("request: model %s max %d temperature %v auth %q", sent.Model, sent.MaxCompletionTokens, sent.Temperature, sent.Header.Get("Authorization"))
	}

	server.Reply(fakes.Reply{Content: "closed", ToolCalls: []fakes.ToolCall{{Name: "emit_signal", Args: `{"signal":"DONE"}`}}})
	if res, _ := step(t, a, req, 10*time.Second); res.Signal != "DONE" || res.Handoff != "" {
		t.Fatalf("signal: %+v", res)
	}

	req.Peers, req.Signals = nil, nil
	req.Children = []agents.Peer{{Name: "billing"}, {Name: "disputes"}}
	server.Reply(fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "route", Args: `{"target":"billing","confidence":0.42,"reason":"an invoice","fallback":"disputes"}`}}})
	res, _ = step(t, a, req, 10*time.Second)
	if want := (&v1alpha1.RoutingDecision{Target: "billing", Confidence: ptr.To(0.42), Reason: "an invoice", Fallback: "disputes"}); !cmp.Equal(want, res.Routing) {
		t.Fatalf("routing: %+v", res.Routing)
	}
}

func TestOpenAIRetriesTransientFailuresOnly(t *testing.T) {
	cases := map[string]struct {
		replies  []fakes.Reply
		requests int
		err      string
		atLeast  time.Duration
	}{
		"429 with Retry-After, then success": {
			replies:  []fakes.Reply{{Status: 429, ErrorMessage: "slow down", Header: map[string]string{"Retry-After": "1"}}, {Content: "ok"}},
			requests: 2, atLeast: time.Second,
		},
		"500 then success": {
			replies:  []fakes.Reply{{Status: 500, ErrorMessage: "boom"}, {Content: "ok"}},
			requests: 2, atLeast: time.Second,
		},
		"three 503s: the third answer is final": {
			replies:  []fakes.Reply{{Status: 503, ErrorMessage: "busy"}, {Status: 503, ErrorMessage: "busy"}, {Status: 503, ErrorMessage: "still busy"}},
			requests: 3, err: "the model server answered 503 Service Unavailable: still busy",
		},
		"401 is not retried, and the key is not repeated": {
			replies:  []fakes.Reply{{Status: 401, ErrorMessage: "Incorrect API key provided: " + apiKey}},
			requests: 1, err: "the model server answered 401 Unauthorized: Incorrect API key provided: [redacted]",
		},
		"404 is not retried": {
			replies:  []fakes.Reply{{Status: 404, ErrorMessage: "The model `gpt-9` does not exist"}},
			requests: 1, err: "the model server answered 404 Not Found: The model `gpt-9` does not exist",
		},
		"malformed JSON": {
			replies:  []fakes.Reply{{Raw: `{"choices": [`}},
			requests: 1, err: "calling the model server:",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewOpenAI()
			defer server.Close()
			a, req := openAIAgent(t, server)
			server.Reply(tc.replies...)
			began := time.Now()
			res, err := step(t, a, req, 20*time.Second)
			if len(server.Requests()) != tc.requests {
				t.Fatalf("%d requests, want %d", len(server.Requests()), tc.requests)
			}
			if tc.err == "" && (err != nil || res.Output != "ok") {
				t.Fatalf("want success, got %v %+v", err, res)
			}
			if tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if elapsed := time.Since(began); elapsed < tc.atLeast {
				t.Fatalf("retried after %v, before %v", elapsed, tc.atLeast)
			}
			if err != nil && strings.Contains(err.Error(), apiKey) {
				t.Fatalf("the error holds the API key: %v", err)
			}
		})
	}
}

func TestOpenAIStepsEndAtTheirDeadline(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := openAIAgent(t, server)
	server.Reply(fakes.Reply{Hang: true})
	began := time.Now()
	_, err := step(t, a, req, 500*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("a hanging server: %v after %v", err, time.Since(began))
	}
	// A Retry-After longer than the time left is not waited for.
	server.Reply(fakes.Reply{Status: 429, ErrorMessage: "later", Header: map[string]string{"Retry-After": "60"}})
	began = time.Now()
	_, err = step(t, a, req, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "429") || time.Since(began) > 2*time.Second {
		t.Fatalf("want the 429 at once, got %v after %v", err, time.Since(began))
	}
}

func TestOpenAITruncationAndContinuation(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := openAIAgent(t, server)
	server.Reply(fakes.Reply{Content: "The report: revenue grew", FinishReason: "length", Tokens: 256})
	res, _ := step(t, a, req, 10*time.Second)
	if res.FinishReason != v1alpha1.FinishLength {
		t.Fatalf("finish reason %q", res.FinishReason)
	}
	req.Continuation, req.Attempt = res.Output, 1
	server.Reply(fakes.Reply{Content: " 12% and churn fell.", Tokens: 300})
	res, _ = step(t, a, req, 10*time.Second)
	if res.Output != " 12% and churn fell." || res.FinishReason != v1alpha1.FinishStop {
		t.Fatalf("continued answer %q %s", res.Output, res.FinishReason)
	}
	sent := server.Requests()[1]
	n := len(sent.Messages)
	if sent.MaxCompletionTokens != 512 || sent.Messages[n-2].Role != "assistant" || sent.Messages[n-2].Content != "The report: revenue grew" ||
		!strings.HasPrefix(sent.Messages[n-1].Content, "Your answer was cut off") {
		t.Fatalf("continuation request: max %d, last messages %+v", sent.MaxCompletionTokens, sent.Messages[n-2:])
	}
}

func TestOpenAIMissingSecretIsAClearError(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := openAIAgent(t, server)
	req.Agent.Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "absent", Key: "apiKey"}
	_, err := step(t, a, req, 5*time.Second)
	if err == nil || err.Error() != "Secret absent (for the API key) does not exist in namespace ns" || len(server.Requests()) != 0 {
		t.Fatalf("got %v with %d requests", err, len(server.Requests()))
	}
}

func TestOpenAIAsksForTheOutputSchema(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := openAIAgent(t, server)
	req.Peers, req.Signals = nil, nil
	req.Agent.OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["answer"]}`)}
	req.Repair = &agents.Repair{Output: `{"reply":"x"}`, Errors: "- at '': missing property 'answer'"}
	server.Reply(fakes.Reply{Content: `{"answer":"x"}`})
	if _, err := step(t, a, req, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sent := server.Requests()[0]
	if sent.ResponseFormat == nil {
		t.Fatal("no response_format for an agent with an outputSchema")
	}
	last := sent.Messages[len(sent.Messages)-1].Content
	for _, want := range []string{"missing property 'answer'", `{"reply":"x"}`, `"required":["answer"]`} {
		if !strings.Contains(last, want) {
			t.Fatalf("the repair request lacks %q:\n%s", want, last)
		}
	}
}

var _ = http.StatusOK
