package agents_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	"github.com/baton-dev/baton/test/fakes"
)

const key = "sk-live-0123456789abcdef"

// keyedOpenAIAgent is an OpenAI agent of the fake server whose key is key.
func keyedOpenAIAgent(t *testing.T, server *fakes.OpenAI) (agents.Agent, agents.Request) {
	t.Helper()
	a, err := providers.New(agents.Dependencies{Secrets: secrets{"ns/llm/apiKey": key}}).For(v1alpha1.ProviderOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	return a, agents.Request{Namespace: "ns", Run: "r", RunUID: "u", Step: 1, Agent: v1alpha1.Agent{Name: "boss", Model: v1alpha1.ModelSpec{
		Provider: v1alpha1.ProviderOpenAI, Name: "gpt", Endpoint: server.BaseURL(),
		APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}}},
		Input:    "route this",
		Children: []agents.Peer{{Name: "billing"}, {Name: "support"}}}
}

func TestAnswersAreCheckedAtTheProviderBoundary(t *testing.T) {
	cases := map[string]struct {
		reply   fakes.Reply
		check   func(t *testing.T, res workflow.Result)
		wantErr string
	}{
		"negative token usage counts as none": {
			reply: fakes.Reply{Content: "fine", Tokens: -2_000_000},
			check: func(t *testing.T, res workflow.Result) {
				if res.Tokens != 0 {
					t.Fatalf("tokens %d", res.Tokens)
				}
			},
		},
		"a routing confidence above 1 fails the step": {
			reply:   fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "route", Args: `{"target":"billing","confidence":1.5,"reason":"sure"}`}}},
			wantErr: "invalid answer: routing confidence 1.5 is outside [0, 1]",
		},
		"a negative routing confidence fails the step": {
			reply:   fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "route", Args: `{"target":"billing","confidence":-0.1,"reason":"x"}`}}},
			wantErr: "routing confidence -0.1 is outside [0, 1]",
		},
		"a key the server quotes is redacted from the answer": {
			reply: fakes.Reply{Content: "your key is " + key + ", keep it safe", ToolCalls: []fakes.ToolCall{
				{Name: "route", Args: `{"target":"billing","confidence":0.9,"reason":"key ` + key + `"}`}}},
			check: func(t *testing.T, res workflow.Result) {
				if strings.Contains(res.Output, key) || strings.Contains(res.Routing.Reason, key) {
					t.Fatalf("the key is in the result: %+v %+v", res, res.Routing)
				}
				if res.Output != "your key is [redacted], keep it safe" {
					t.Fatalf("output %q", res.Output)
				}
			},
		},
		"a key the server quotes in an error is redacted": {
			reply:   fakes.Reply{Status: http.StatusBadRequest, ErrorMessage: "bad key " + key},
			wantErr: "bad key [redacted]",
		},
		"invalid UTF-8 is replaced": {
			reply: fakes.Reply{Raw: `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"a` + "\xff" + `b"}}],"usage":{"total_tokens":3}}`},
			check: func(t *testing.T, res workflow.Result) {
				if res.Output != "a\uFFFDb" {
					t.Fatalf("output %q", res.Output)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewOpenAI()
			defer server.Close()
			server.Reply(tc.reply)
			a, req := keyedOpenAIAgent(t, server)
			res, err := step(t, a, req, 5*time.Second)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v", tc.wantErr, err)
				}
				if strings.Contains(err.Error(), key) {
					t.Fatalf("the key is in the error: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, res)
		})
	}
}

func TestAnAnswerLargerThanTheBoundFailsTheStep(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"`))
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 12 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer server.Close()
	a, err := providers.New(agents.Dependencies{}).For(v1alpha1.ProviderOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	_, err = step(t, a, agents.Request{Agent: v1alpha1.Agent{Name: "a", Model: v1alpha1.ModelSpec{
		Provider: v1alpha1.ProviderOpenAI, Name: "m", Endpoint: server.URL}}}, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "the answer is larger than 8 MiB") {
		t.Fatalf("want the answer refused as larger than 8 MiB, got %v", err)
	}
}
