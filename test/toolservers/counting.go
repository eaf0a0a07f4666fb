package toolservers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// CountingTool is an HTTP tool (one tool per endpoint, as Baton's http tool servers are) that
// records every call with its Idempotency-Key and answers a JSON object. It is how a test proves
// that a side-effecting call was not made twice: Repeated is the number of keys that arrived
// more than once.
//
// The zero value is a ready http.Handler, so that a small binary can serve it (see
// ./countingtool); NewCountingTool serves it in process. A POST to any path is a call; GET
// /calls answers the counts as JSON, for a test that cannot reach the process's memory.
type CountingTool struct {
	// URL is where the tool takes calls, when it was started by NewCountingTool.
	URL string

	server *httptest.Server
	mu     sync.Mutex
	delay  time.Duration
	calls  []ToolCall
	// unanswered counts calls whose caller went away before the answer.
	unanswered int
}

// ToolCall is one call the tool received.
type ToolCall struct {
	IdempotencyKey string          `json:"idempotencyKey"`
	Arguments      json.RawMessage `json:"arguments"`
	Header         http.Header     `json:"-"`
}

// CallCounts is what GET /calls answers.
type CallCounts struct {
	Calls    int            `json:"calls"`
	Repeated int            `json:"repeated"`
	Keys     map[string]int `json:"keys"`
}

// NewCountingTool serves a CountingTool on a loopback port; Close stops it.
func NewCountingTool() *CountingTool {
	c := &CountingTool{}
	c.server = httptest.NewServer(c)
	c.URL = c.server.URL + "/call"
	return c
}

// Close stops a tool started by NewCountingTool.
func (c *CountingTool) Close() {
	if c.server != nil {
		c.server.Close()
	}
}

// SetDelay holds every later answer for d, after the call is recorded: a test can stop the
// caller while a call is in flight.
func (c *CountingTool) SetDelay(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delay = d
}

// Calls is every call received, oldest first.
func (c *CountingTool) Calls() []ToolCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ToolCall(nil), c.calls...)
}

// Unanswered is how many calls' callers went away while the tool held the answer (see
// SetDelay): calls in flight when their caller stopped.
func (c *CountingTool) Unanswered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unanswered
}

// Repeated is how many idempotency keys arrived more than once.
func (c *CountingTool) Repeated() int {
	return c.counts().Repeated
}

func (c *CountingTool) counts() CallCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := CallCounts{Calls: len(c.calls), Keys: map[string]int{}}
	for _, call := range c.calls {
		out.Keys[call.IdempotencyKey]++
	}
	for _, n := range out.Keys {
		if n > 1 {
			out.Repeated++
		}
	}
	return out
}

// ServeHTTP takes a call (POST) or answers the counts (GET /calls).
func (c *CountingTool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet && r.URL.Path == "/calls" {
		_ = json.NewEncoder(w).Encode(c.counts())
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = io.WriteString(w, `{"error":"POST a call, or GET /calls"}`)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || !json.Valid(body) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"the arguments are not JSON"}`)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	c.mu.Lock()
	c.calls = append(c.calls, ToolCall{IdempotencyKey: key, Arguments: body, Header: r.Header.Clone()})
	n, delay := len(c.calls), c.delay
	seen := 0
	for _, call := range c.calls {
		if call.IdempotencyKey == key {
			seen++
		}
	}
	c.mu.Unlock()
	if delay > 0 {
		select {
		case <-r.Context().Done():
			c.mu.Lock()
			c.unanswered++
			c.mu.Unlock()
			return
		case <-time.After(delay):
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"ok": true, "call": n, "idempotencyKey": key, "timesSeen": seen, "arguments": json.RawMessage(body),
	})
}
