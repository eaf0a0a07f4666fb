// Package a2aagents serves A2A agents on loopback for tests, with the protocol's Go SDK: an
// agent answers each message with the Turn its test gives, and records what it was sent. One
// speaking A2A 1.0 and 0.3 (both interfaces on its card) or 0.3 only.
package a2aagents

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Turn is how the agent answers one message.
type Turn struct {
	// Progress are status messages sent while the task is at work, before the answer.
	Progress []string
	// State is where the task ends: completed (the default), input-required, failed,
	// rejected, auth-required.
	State a2a.TaskState
	// Text is the answer's text: the artifact of a completed task, the status message of
	// another.
	Text string
	// Data, when set, is a data part of the answer.
	Data any
	// Message answers with a message rather than a task.
	Message bool
}

// Received is a message the agent was sent, with the request's headers.
type Received struct {
	Message *a2a.Message
	Header  http.Header
	// TaskID is the task the message ran in (new or continued).
	TaskID string
}

// Agent is an A2A agent served on loopback.
type Agent struct {
	*httptest.Server
	answer func(msg *a2a.Message, task *a2a.Task) Turn

	mu       sync.Mutex
	received []Received
}

// Options say how the agent is served.
type Options struct {
	// Streaming is what its card says of streaming.
	Streaming bool
	// V03Only serves the card and JSON-RPC of A2A 0.3 only.
	V03Only bool
	// RESTOnly serves A2A 1.0 over its HTTP+JSON binding only, under /rest.
	RESTOnly bool
}

// Start serves an agent that answers with answer (given the message and, for a message that
// continues a task, the task so far).
func Start(opts Options, answer func(msg *a2a.Message, task *a2a.Task) Turn) *Agent {
	a := &Agent{answer: answer}
	mux := http.NewServeMux()
	a.Server = httptest.NewServer(mux)
	handler := a2asrv.NewHandler(executor{a})
	card := &a2a.AgentCard{Name: "test-agent", Description: "an agent for tests", Version: "1.0.0",
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain", "application/json"},
		Capabilities: a2a.AgentCapabilities{Streaming: opts.Streaming},
		Skills:       []a2a.AgentSkill{{ID: "answer", Name: "Answer", Description: "answers", Tags: []string{"test"}}}}
	if opts.V03Only {
		mux.Handle("/a2a/v0", a2av0.NewJSONRPCHandler(handler))
		mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"name": card.Name, "description": card.Description, "version": card.Version,
				"protocolVersion": "0.3.0", "url": a.URL + "/a2a/v0", "preferredTransport": "JSONRPC",
				"capabilities": map[string]any{"streaming": opts.Streaming}, "defaultInputModes": card.DefaultInputModes,
				"defaultOutputModes": card.DefaultOutputModes, "skills": []map[string]any{{"id": "answer", "name": "Answer", "description": "answers", "tags": []string{"test"}}}})
		})
		return a
	}
	if opts.RESTOnly {
		card.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface(a.URL+"/rest", a2a.TransportProtocolHTTPJSON)}
		mux.Handle("/rest/", http.StripPrefix("/rest", a2asrv.NewRESTHandler(handler)))
		mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
		return a
	}
	card.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface(a.URL+"/a2a", a2a.TransportProtocolJSONRPC),
		{URL: a.URL + "/a2a/v0", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version}}
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/a2a/v0", a2av0.NewJSONRPCHandler(handler))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
	return a
}

// Received are the messages the agent was sent, in order.
func (a *Agent) Received() []Received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Received(nil), a.received...)
}

type executor struct{ a *Agent }

func (e executor) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		h := http.Header{}
		if ec.ServiceParams != nil {
			for k, v := range ec.ServiceParams.List() {
				h[http.CanonicalHeaderKey(k)] = v
			}
		}
		e.a.mu.Lock()
		e.a.received = append(e.a.received, Received{Message: ec.Message, Header: h, TaskID: string(ec.TaskID)})
		e.a.mu.Unlock()
		turn := e.a.answer(ec.Message, ec.StoredTask)
		if turn.Message {
			yield(a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts(turn)...), nil)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		for _, p := range turn.Progress {
			msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(p))
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, msg), nil) {
				return
			}
		}
		state := turn.State
		if state == "" || state == a2a.TaskStateCompleted {
			if !yield(a2a.NewArtifactEvent(ec, parts(turn)...), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts(turn)...)), nil)
	}
}

func (e executor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func parts(t Turn) []*a2a.Part {
	var out []*a2a.Part
	if t.Text != "" {
		out = append(out, a2a.NewTextPart(t.Text))
	}
	if t.Data != nil {
		out = append(out, a2a.NewDataPart(t.Data))
	}
	if len(out) == 0 {
		out = append(out, a2a.NewTextPart(fmt.Sprintf("(%s)", t.State)))
	}
	return out
}
