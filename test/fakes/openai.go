// Package fakes serves the wire formats Baton's providers speak, on loopback, for tests: an
// OpenAI-compatible chat completions server and an HTTP agent. They answer what a test queues
// and record what they were sent.
package fakes

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
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
	// Tokens is the usage reported (split between prompt and completion).
	Tokens int64
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

// ChatTool is one tool a request offered.
type ChatTool struct {
	Function struct {
		Name string `json:"name"`
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
// message) or for any agent; an agent's last reply repeats once its queue runs out.
type OpenAI struct {
	*httptest.Server
	mu       sync.Mutex
	queues   map[string][]Reply
	last     map[string]Reply
	requests []ChatRequest
	calls    int
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
}

// Requests returns what the server was sent, oldest first.
func (f *OpenAI) Requests() []ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ChatRequest(nil), f.requests...)
}

func (f *OpenAI) next(agent string) (Reply, bool) {
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
	r, ok := f.last[""]
	return r, ok
}

func (f *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req ChatRequest
	_ = json.Unmarshal(body, &req)
	req.Header = r.Header.Clone()
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()

	reply, ok := f.next(req.Agent())
	if !ok {
		writeError(w, http.StatusInternalServerError, "the fake has no reply queued for "+req.Agent())
		return
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
		return
	case reply.Status != 0 && reply.Status != http.StatusOK:
		writeError(w, reply.Status, reply.ErrorMessage)
		return
	case reply.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply.Raw)
		return
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	calls := make([]map[string]any, len(reply.ToolCalls))
	f.mu.Lock()
	for i, c := range reply.ToolCalls {
		f.calls++
		calls[i] = map[string]any{"id": fmt.Sprintf("call_%d", f.calls), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Args}}
	}
	f.mu.Unlock()
	message := map[string]any{"role": "assistant", "content": reply.Content}
	if len(calls) > 0 {
		message["tool_calls"] = calls
	}
	prompt := reply.Tokens / 2
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": reply.Tokens - prompt, "total_tokens": reply.Tokens},
	})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}})
}
