package fakes

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// HTTPAgentCall is one request an HTTP agent received.
type HTTPAgentCall struct {
	IdempotencyKey string
	Authorization  string
	Body           map[string]any
}

// HTTPAgent is a fake agent served over HTTP: it answers queued statuses and bodies, in order,
// the last one repeating.
type HTTPAgent struct {
	*httptest.Server
	mu      sync.Mutex
	answers []HTTPAnswer
	calls   []HTTPAgentCall
}

// HTTPAnswer is one answer: a status and a JSON body.
type HTTPAnswer struct {
	Status int
	Body   any
}

// NewHTTPAgent starts a fake HTTP agent.
func NewHTTPAgent(answers ...HTTPAnswer) *HTTPAgent {
	f := &HTTPAgent{answers: answers}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Calls returns what the agent received, oldest first.
func (f *HTTPAgent) Calls() []HTTPAgentCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]HTTPAgentCall(nil), f.calls...)
}

func (f *HTTPAgent) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	call := HTTPAgentCall{IdempotencyKey: r.Header.Get("Idempotency-Key"), Authorization: r.Header.Get("Authorization")}
	_ = json.Unmarshal(data, &call.Body)
	f.mu.Lock()
	f.calls = append(f.calls, call)
	answer := HTTPAnswer{Status: http.StatusInternalServerError, Body: map[string]any{"error": "nothing queued"}}
	if len(f.answers) > 0 {
		answer = f.answers[0]
		if len(f.answers) > 1 {
			f.answers = f.answers[1:]
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if answer.Status == 0 {
		answer.Status = http.StatusOK
	}
	w.WriteHeader(answer.Status)
	_ = json.NewEncoder(w).Encode(answer.Body)
}
