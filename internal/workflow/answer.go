package workflow

// The vocabulary of one agent step that the core decides from and the providers answer in:
// what a step produced (Result), what remains of a run's limits before it (Left), what an agent
// sees of the run's earlier steps (ContextEntry), the messages a model was sent (Message), and
// the tool calls a step asks for, their outcomes and the ways one can stop a step (ToolCall,
// ToolOutcome, Held, ToolTrip). The providers import these from the core, so that the
// core imports no provider.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Result is what a step produced. Its JSON is how a step's transcript record keeps it
// (package records).
type Result struct {
	// Output is the agent's answer.
	Output string `json:"output"`
	// Handoff is the agent it asks to hand control to.
	Handoff string `json:"handoff,omitempty"`
	// Reason is why it hands off.
	Reason string `json:"reason,omitempty"`
	// Signal is a signal it emits.
	Signal string `json:"signal,omitempty"`
	// Routing is a supervisor's routing decision.
	Routing *v1alpha1.RoutingDecision `json:"routing,omitempty"`
	// Parallel are the branches the agent hands off to at once (Branch).
	Parallel []Branch `json:"parallel,omitempty"`
	// FinishReason says why the model stopped.
	FinishReason v1alpha1.FinishReason `json:"finishReason,omitempty"`
	// Tokens is the usage the step reports, and CountedTokens the part of it already added to
	// the run's status while the step was held at gates. InputTokens and CountedInputTokens are
	// the parts of them that were prompts (0 when the provider does not say); the rest was
	// output.
	Tokens             int64 `json:"tokens"`
	InputTokens        int64 `json:"inputTokens,omitempty"`
	CountedTokens      int64 `json:"countedTokens,omitempty"`
	CountedInputTokens int64 `json:"countedInputTokens,omitempty"`
	// Cost is what the step's model calls cost, from its endpoint's prices, as a decimal
	// string in Currency; CountedCost the part of it already added to the run's status while
	// the step was held at gates. Empty when the step's endpoint has no prices.
	Cost        string `json:"cost,omitempty"`
	CountedCost string `json:"countedCost,omitempty"`
	Currency    string `json:"currency,omitempty"`
	// EarlierCost is what the step's model calls cost before this execution of it (a step
	// held, or cut short by a restart, goes on from its transcript), from their turn records:
	// the step's Cost counts it with the calls made since.
	EarlierCost string `json:"-"`
	// Ignored names the further tool calls of a model that called several; the first won.
	Ignored []string `json:"ignoredToolCalls,omitempty"`
	// ToolCalls is the number of tool calls the step made, and CountedToolCalls those of them
	// already added to the run's status while the step was held at gates.
	ToolCalls        int32 `json:"toolCalls,omitempty"`
	CountedToolCalls int32 `json:"countedToolCalls,omitempty"`
	// Held is set when the step stopped at a tool call that waits for approval (a record of
	// its own keeps it).
	Held *Held `json:"-"`
	// Trip is set when a guard stopped the run before a tool call.
	Trip *ToolTrip `json:"trip,omitempty"`
	// QuotaHold is set when the step stopped before a model call that would pass a cost or
	// token cap of its namespace: the run waits, and the step goes on from its transcript once
	// there is room. Nothing of it is recorded or counted until then.
	QuotaHold *QuotaHold `json:"-"`
	// InputRequired is set when the agent asks a person for input, Output being its question:
	// the run waits for a reply, which is the agent's next input (an A2A agent's task in state
	// input-required).
	InputRequired bool `json:"inputRequired,omitempty"`
	// RemoteTask names the task a remote agent keeps open for the agent's next turn (an A2A
	// task that asks for input): the provider continues it with the reply.
	RemoteTask string `json:"remoteTask,omitempty"`
	// Taint is where untrusted content first came into the step's context during the step (an
	// Untrusted tool server's result), or the run's taint it started with.
	Taint *v1alpha1.Taint `json:"taint,omitempty"`
}

// Message is one chat message a model was sent for a step.
type Message struct {
	// Role is system, user or assistant.
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ToolOutcome is a call's result as the model is given it.
type ToolOutcome struct {
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
	// Made is set when the call was sent to its tool: calls held back (rejected, past a limit)
	// are not, and do not count.
	Made bool `json:"made,omitempty"`
}

// Left is what remains of a run's limits before a step.
type Left struct {
	Steps    int32 `json:"steps"`
	Handoffs int32 `json:"handoffs"`
	Tokens   int64 `json:"tokens"`
	// Seconds is the time left before the run's timeout, if it has started counting.
	Seconds int64 `json:"seconds,omitempty"`
}

// ReasonInputRequired is the reason a step's handoff record gives when its agent asked a person
// for input (Result.InputRequired).
const ReasonInputRequired = "asks for input"

// ContextKind says what a context entry is.
type ContextKind string

// Context entry kinds.
const (
	ContextOutput    ContextKind = "Output"
	ContextTruncated ContextKind = "Truncated"
	ContextInvalid   ContextKind = "Invalid"
	ContextFailed    ContextKind = "Failed"
	ContextFeedback  ContextKind = "Feedback"
	ContextReply     ContextKind = "Reply"
	// ContextTimedOut says that a gate's timeout passed with nobody's decision.
	ContextTimedOut ContextKind = "TimedOut"
	// ContextAsked, ContextAnswered and ContextSummary are a session's earlier turns, given to
	// each turn as its history: what a turn was asked, what the team answered, and the summary
	// of the turns before the window.
	ContextAsked    ContextKind = "Asked"
	ContextAnswered ContextKind = "Answered"
	ContextSummary  ContextKind = "Summary"
)

// ContextEntry is one thing an agent sees from earlier in the run.
type ContextEntry struct {
	// Step is the step it came from, or the step after which a person said it.
	Step int32 `json:"step"`
	// From is the agent that said it, or the person.
	From string `json:"from"`
	// Kind is Output, Truncated (a cut answer), Invalid (an answer that failed its schema, with
	// the errors), Failed, Feedback or Reply.
	Kind ContextKind `json:"kind"`
	// Text is what was said, in full.
	Text string `json:"text,omitempty"`
}

// ToolCall is a call a model asks for.
type ToolCall struct {
	// Index is the call's number within its step, from 1; the toolbox numbers calls.
	Index int32 `json:"index"`
	// ID is the model's id for the call.
	ID        string          `json:"id"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// Held is a call, or a text a guardrail asked a person to review, that waits for people at its
// gate: the step stops here and goes on once the gate is decided.
type Held struct {
	Gate string
	// Call is the call that waits, or whose result waits at a guardrail's gate; none for a
	// step's input or output.
	Call ToolCall
	// Taint is where the untrusted content in the call's context came from, for a call held at
	// its taint gate.
	Taint string
	// Guard is the text held at a guardrail's gate (guard/<guardrail>), with where in the step
	// it came; the core sets its step.
	Guard *v1alpha1.PendingGuard
}

func (h *Held) Error() string {
	if g := h.Guard; g != nil {
		return fmt.Sprintf("%s waits at gate %s", guardedText(*g, h.Call), h.Gate)
	}
	return fmt.Sprintf("call %d of %s/%s waits at gate %s", h.Call.Index, h.Call.Server, h.Call.Tool, h.Gate)
}

// ToolTrip is a guard that stops the run before a call: the run's tool call limit or the
// repeated-call detector.
type ToolTrip struct {
	Reason  v1alpha1.TerminationReason `json:"reason"`
	Message string                     `json:"message"`
	Loop    *v1alpha1.LoopStatus       `json:"loop,omitempty"`
	// Call is the call the guard stopped, when a guard of the calls did (GuardCall).
	Call *ToolUse `json:"call,omitempty"`
}

func (t *ToolTrip) Error() string { return t.Message }

// QuotaHold is a model call not made because it would pass a cost or token cap of the run's
// namespace: the run waits until the cap's period resets or the cap is raised.
type QuotaHold struct {
	// Quota names the AgentQuota whose cap holds the call.
	Quota string
	// Message says which cap, what was spent and what the call could cost.
	Message string
	// Until is when the cap's period resets.
	Until time.Time
}

func (q *QuotaHold) Error() string { return q.Message }
