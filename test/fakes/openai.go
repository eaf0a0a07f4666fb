// Package fakes serves the wire formats Baton's providers speak, on loopback, for tests: an
// OpenAI-compatible chat completions server and an HTTP agent. They answer what a test queues
// and record what they were sent; the model server also enforces rate limits as OpenAI does, and
// counts what it answered, for tests and benchmarks of clients under load.
package fakes

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// Reply is one answer of the fake model server.
type Reply struct {
	// Status, when not 200, answers with an OpenAI error object and this status.
	Status int
	// ErrorMessage is the error object's message.
	ErrorMessage string
	// Header is set on the answer, e.g. Retry-After.
	Header map[string]string
	// Content is the assistant message's text.
	Content string
	// ToolCalls are the assistant message's function calls, in order.
	ToolCalls []ToolCall
	// FinishReason defaults to "stop", or "tool_calls" when there are tool calls.
	FinishReason string
	// Tokens is the usage reported: total_tokens, split between prompt and completion.
	Tokens int64
	// PromptTokens is the prompt's part of Tokens; half of Tokens, rounded down, unless set.
	PromptTokens int64
	// CachedTokens is the part of the prompt reported as read from the cache
	// (prompt_tokens_details.cached_tokens). It is not checked against the prompt's part, so a
	// test can send usage that does not add up.
	CachedTokens int64
	// FillCap reports, instead of Tokens, the usage of a model that writes all the request
	// allows: the prompt as PromptEstimate counts it, and as many completion tokens as
	// max_completion_tokens, else max_tokens, allows (Tokens' completion part when it sets
	// neither). A request then costs the most its cap lets it.
	FillCap bool
	// Raw, when set, is sent as the body instead, e.g. malformed JSON.
	Raw string
	// Hang waits until the client gives up.
	Hang bool
}

// ToolCall is one function call.
type ToolCall struct {
	Name string
	Args string
}

// ChatRequest is what a chat completions request carried.
type ChatRequest struct {
	Header              http.Header `json:"-"`
	Model               string      `json:"model"`
	Messages            []ChatMsg   `json:"messages"`
	Tools               []ChatTool  `json:"tools"`
	MaxCompletionTokens int64       `json:"max_completion_tokens"`
	MaxTokens           int64       `json:"max_tokens"`
	Temperature         *float64    `json:"temperature"`
	ResponseFormat      any         `json:"response_format"`
}

// ChatMsg is one message of a request: a tool call's result carries its call's id, an
// assistant's message the calls it made.
type ChatMsg struct {
	Role       string        `json:"role"`
	Content    string        `json:"content"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
	ToolCalls  []ChatMsgCall `json:"tool_calls,omitempty"`
}

// ChatMsgCall is a call an assistant message made.
type ChatMsgCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ToolResults are the results of tool calls a request carried, oldest first.
func (r ChatRequest) ToolResults() []ChatMsg {
	var out []ChatMsg
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// PromptEstimate is the request's prompt in tokens as OpenAI estimates it before counting it
// against a token limit: the bytes of its messages' text and tool calls, four to a token,
// rounded up.
func (r ChatRequest) PromptEstimate() int64 {
	var n int
	for _, m := range r.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	return int64((n + 3) / 4)
}

// CountedTokens is what the request counts against a token limit: its prompt estimate and the
// completion it allows, max_completion_tokens or else max_tokens (none when it sets neither).
func (r ChatRequest) CountedTokens() int64 {
	completion := r.MaxCompletionTokens
	if completion <= 0 {
		completion = max(r.MaxTokens, 0)
	}
	return r.PromptEstimate() + completion
}

// ChatTool is one tool a request offered: its name and the JSON Schema of its arguments.
type ChatTool struct {
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// ToolNames lists the tools a request offered.
func (r ChatRequest) ToolNames() []string {
	out := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		out[i] = t.Function.Name
	}
	return out
}

// Agent is the agent a request is for, read from its system message.
func (r ChatRequest) Agent() string {
	if len(r.Messages) > 0 {
		if m := agentName.FindStringSubmatch(r.Messages[0].Content); m != nil {
			return m[1]
		}
	}
	return ""
}

var agentName = regexp.MustCompile(`You are the agent "([^"]+)"`)

// OpenAI is a fake OpenAI-compatible server. Replies are queued per agent (read from the system
// message) or for any agent; an agent's last reply repeats once its queue runs out, and the
// Default reply answers when no reply was ever queued for the agent or for any agent.
//
// Its limits (Limit) are off until set. Stats counts what it answered; Record(false) stops it
// keeping what it was sent, for runs of many requests.
type OpenAI struct {
	*httptest.Server
	mu       sync.Mutex
	queues   map[string][]Reply
	last     map[string]Reply
	requests []ChatRequest
	calls    atomic.Int64
	// scripted is set once a reply is queued: until then every request gets the default reply,
	// without reading its agent.
	scripted atomic.Bool
	settings atomic.Pointer[settings]
	limits   limiter
	answered struct{ ok, limited, other atomic.Int64 }
}

// settings are how the server answers; replaced whole, so a request reads them without a lock.
type settings struct {
	fallback *Reply
	latency  time.Duration
	forget   bool
	observe  func(Answer)
}

// Answer is how the server answered one request, for an observer.
type Answer struct {
	// Start is when the request arrived, Duration how long the server took to answer it.
	Start    time.Time
	Duration time.Duration
	// Status is the status answered.
	Status int
	// Limit names the limit a 429 of the server's limits was for: "requests", "tokens" or
	// "concurrency"; empty for other answers.
	Limit string
	// Tokens is what the request counted against a token limit, or would have.
	Tokens int64
}

// Stats are what the server has answered so far.
type Stats struct {
	// OK counts answers with status 200.
	OK int64
	// RateLimited counts the 429s the limits answered; a queued 429 counts as Other.
	RateLimited int64
	// Other counts every other answer: queued errors, or no reply to give.
	Other int64
	// InFlight is the admitted requests not yet answered, PeakInFlight the most there were.
	InFlight, PeakInFlight int
	// PeakWindowRequests is the most requests admitted within one window (a minute unless the
	// limits say otherwise), whether or not a limit is set: a client that paced itself to a
	// limit reaches it, and no more.
	PeakWindowRequests int64
	// PeakWindowTokens is the most tokens the requests admitted within one window counted.
	PeakWindowTokens int64
}

// NewOpenAI starts a fake model server; its URL is the base URL to configure (".../v1").
func NewOpenAI() *OpenAI {
	f := &OpenAI{queues: map[string][]Reply{}, last: map[string]Reply{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// BaseURL is the endpoint to put in an agent's model.endpoint.
func (f *OpenAI) BaseURL() string { return f.URL + "/v1" }

// Reply queues answers for any agent.
func (f *OpenAI) Reply(r ...Reply) { f.ReplyTo("", r...) }

// ReplyTo queues answers for one agent.
func (f *OpenAI) ReplyTo(agent string, r ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[agent] = append(f.queues[agent], r...)
	f.scripted.Store(true)
}

// Default sets the reply for requests that nothing was queued for: the cheapest answer, for
// load.
func (f *OpenAI) Default(r Reply) { f.configure(func(s *settings) { s.fallback = &r }) }

// Latency makes every admitted request wait d before its answer (a 429 of the limits is
// immediate), holding its place among the requests in flight but no lock.
func (f *OpenAI) Latency(d time.Duration) { f.configure(func(s *settings) { s.latency = d }) }

// Record sets whether the server keeps what it is sent for Requests; it does unless told not
// to. Stats are counted either way.
func (f *OpenAI) Record(on bool) { f.configure(func(s *settings) { s.forget = !on }) }

// Observe calls fn after each answer, from the goroutine that served it: fn must be safe to
// call concurrently, and quick.
func (f *OpenAI) Observe(fn func(Answer)) { f.configure(func(s *settings) { s.observe = fn }) }

// Limit sets the limits the server enforces from now on; what the window holds is kept.
//
// Every answer then carries OpenAI's headers for each limit set: x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests (after this request counted) and x-ratelimit-reset-requests
// (how long until one more request would be admitted, "0s" when it would be now), and the same
// for -tokens (how long until a request counting as many tokens as this one would be). Beyond a
// limit the answer is 429 with OpenAI's error object (type "requests", "tokens" or
// "concurrency", code "rate_limit_exceeded"), Retry-After in whole seconds rounded up and
// retry-after-ms; a request counting more tokens than the limit gets no Retry-After, as it
// never will be admitted.
func (f *OpenAI) Limit(l RateLimits) {
	f.limits.mu.Lock()
	defer f.limits.mu.Unlock()
	f.limits.limits = l
}

// Stats returns what the server has answered so far; it may be read while it serves.
func (f *OpenAI) Stats() Stats {
	s := Stats{OK: f.answered.ok.Load(), RateLimited: f.answered.limited.Load(), Other: f.answered.other.Load()}
	f.limits.mu.Lock()
	defer f.limits.mu.Unlock()
	s.InFlight, s.PeakInFlight = f.limits.inFlight, f.limits.peak
	s.PeakWindowRequests, s.PeakWindowTokens = f.limits.peakRequests, f.limits.peakTokens
	return s
}

func (f *OpenAI) configure(change func(*settings)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := *f.current()
	change(&s)
	f.settings.Store(&s)
}

func (f *OpenAI) current() *settings {
	if s := f.settings.Load(); s != nil {
		return s
	}
	return &settings{}
}

// Requests returns what the server was sent, oldest first.
func (f *OpenAI) Requests() []ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ChatRequest(nil), f.requests...)
}

func (f *OpenAI) next(req *ChatRequest, fallback *Reply) (Reply, bool) {
	if !f.scripted.Load() {
		if fallback != nil {
			return *fallback, true
		}
		return Reply{}, false
	}
	agent := req.Agent()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, key := range []string{agent, ""} {
		if q := f.queues[key]; len(q) > 0 {
			f.queues[key] = q[1:]
			f.last[key] = q[0]
			return q[0], true
		}
		if r, ok := f.last[key]; ok && key != "" {
			return r, true
		}
	}
	if r, ok := f.last[""]; ok {
		return r, true
	}
	if fallback != nil {
		return *fallback, true
	}
	return Reply{}, false
}

func (f *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req ChatRequest
	_ = json.Unmarshal(body, &req)
	cfg := f.current()
	if !cfg.forget {
		req.Header = r.Header.Clone()
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
	}
	answer := Answer{Start: start, Tokens: req.CountedTokens()}
	adm := f.limits.admit(answer.Tokens, cfg.latency)
	adm.setHeaders(w.Header())
	if adm.refused != "" {
		writeAPIError(w, http.StatusTooManyRequests, adm.message, adm.refused, "rate_limit_exceeded")
		f.answered.limited.Add(1)
		answer.Limit = adm.refused
		f.observed(cfg, answer, http.StatusTooManyRequests)
		return
	}
	status := f.answer(w, r, &req, cfg)
	f.limits.release()
	if status == 0 {
		return
	}
	if status == http.StatusOK {
		f.answered.ok.Add(1)
	} else {
		f.answered.other.Add(1)
	}
	f.observed(cfg, answer, status)
}

func (f *OpenAI) observed(cfg *settings, a Answer, status int) {
	if cfg.observe != nil {
		a.Status, a.Duration = status, time.Since(a.Start)
		cfg.observe(a)
	}
}

// answer writes the reply to an admitted request and returns its status, or 0 when the client
// gave up first.
func (f *OpenAI) answer(w http.ResponseWriter, r *http.Request, req *ChatRequest, cfg *settings) int {
	reply, ok := f.next(req, cfg.fallback)
	if !ok {
		writeAPIError(w, http.StatusInternalServerError, "the fake has no reply queued for "+req.Agent(), "invalid_request_error", nil)
		return http.StatusInternalServerError
	}
	if cfg.latency > 0 && !reply.Hang {
		t := time.NewTimer(cfg.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return 0
		}
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Hang:
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return 0
	case reply.Status != 0 && reply.Status != http.StatusOK:
		writeAPIError(w, reply.Status, reply.ErrorMessage, "invalid_request_error", nil)
		return reply.Status
	case reply.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply.Raw)
		return http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f.completion(req, &reply))
	return http.StatusOK
}

// completion is the chat completion object a reply to req is sent as.
func (f *OpenAI) completion(req *ChatRequest, reply *Reply) chatCompletion {
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	message := chatMessage{Role: "assistant", Content: reply.Content}
	for _, c := range reply.ToolCalls {
		call := chatToolCall{ID: fmt.Sprintf("call_%d", f.calls.Add(1)), Type: "function"}
		call.Function.Name, call.Function.Arguments = c.Name, c.Args
		message.ToolCalls = append(message.ToolCalls, call)
	}
	prompt := reply.Tokens / 2
	if reply.PromptTokens != 0 {
		prompt = reply.PromptTokens
	}
	completion := reply.Tokens - prompt
	if reply.FillCap {
		prompt = req.PromptEstimate()
		if capped := req.CountedTokens() - prompt; capped > 0 {
			completion = capped
		}
	}
	out := chatCompletion{ID: "chatcmpl-fake", Object: "chat.completion", Created: time.Now().Unix(), Model: req.Model,
		Choices: []chatChoice{{Message: message, FinishReason: finish}},
		Usage:   chatUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}}
	out.Usage.PromptTokensDetails.CachedTokens = reply.CachedTokens
	return out
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   chatUsage    `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// writeAPIError answers with OpenAI's error object.
func writeAPIError(w http.ResponseWriter, status int, msg, typ string, code any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}
