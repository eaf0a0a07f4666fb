package workflow

import (
	"fmt"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// StepResult is what one agent step produced, as the controller hands it to Apply.
type StepResult struct {
	// Agent took the step.
	Agent string
	// Input is what the agent was given.
	Input string
	// Result is what the agent answered. A continuation's Output is the whole answer: the
	// pieces so far joined with the new one.
	Result
	// Error, when set, says why the step failed.
	Error string
	// TimedOut is set when the step failed by running past its deadline.
	TimedOut bool
	// RecordBytes is what the step's records take in the transcript.
	RecordBytes int64
}

// Step is the next step a run should take.
type Step struct {
	// Number is the step's number in the run, from 1.
	Number int32
	// Agent takes the step.
	Agent string
	// Input is what the agent is given.
	Input string
	// Turn is how many steps the agent took before in this run.
	Turn int32
	// Timeout is the step's deadline.
	Timeout time.Duration
	// Reason is why the agent has control: the handoff's reason, the routing, the failure.
	Reason string
	// Attempt counts the agent's retries of this answer: after truncation or a failed schema.
	Attempt int
	// Continues is set when the agent continues its answer that was cut at the output-token
	// limit: the caller gives it the answer so far, from the previous step's record, and joins
	// the pieces before Apply.
	Continues bool
	// Repairs is set when the agent is asked to fix an answer that failed its outputSchema: the
	// caller gives it the answer and the errors, from the previous step's record.
	Repairs bool
	// Left is what remains of the run's limits; the caller fills in the seconds.
	Left Left
	// MaxBranches is the most branches the step may fan out to: 0 when the agent has no
	// parallel, the run is at limits.maxDepth, or its limits.maxBranches are spent. The caller
	// offers the agent no fan-out then.
	MaxBranches int32
	// WrapUp, when set, makes the step the run's last turn, after this limit ran out: the
	// agent is told so and given no handoffs and no tools. (On the steps before it, the caller
	// keeps the wrap-up turn's worst-case cost in reserve: see Plan.WrapUpAgent.)
	WrapUp *v1alpha1.WrappingUp
}

// Event is an Event the controller emits once the status it goes with is written.
type Event struct {
	// Type is Normal or Warning.
	Type string
	// Reason is a CamelCase reason.
	Reason string
	// Message is the Event's text. It never holds raw model output.
	Message string
	// Action is what the Event is about, when it is not the step or the end of the run. Events
	// of one write that share type, reason and action are merged into one, so each decision's
	// Events carry their own.
	Action string
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event reasons other than the termination reasons, which are used as they are.
const (
	EventWaitingForConfig   = "WaitingForConfig"
	EventWaitingForSecret   = "WaitingForSecret"
	EventHandoffRefused     = "HandoffRefused"
	EventTerminateIgnored   = "TerminateIgnored"
	EventStepFailed         = "StepFailed"
	EventTokenBudgetWarning = "TokenBudgetWarning"
	EventCostBudgetWarning  = "CostBudgetWarning"
	EventAwaitingApproval   = "AwaitingApproval"
	EventAwaitingInput      = "AwaitingInput"
	EventDecisionApplied    = "DecisionApplied"
	EventDecisionIgnored    = "DecisionIgnored"
	EventToolCallsIgnored   = "ToolCallsIgnored"
	EventOutputInvalid      = "OutputInvalid"
	EventWrappingUp         = "WrappingUp"
)

// Update is what the core makes of a run's status: its next status, the Events that go with
// it, and what it adds to the context window of the agents after it. (A decision, in this
// package, is always a person's: an approval, a rejection, a reply.)
type Update struct {
	Status v1alpha1.AgentRunStatus
	Events []Event
	// Guard names the guard that ended the run in this update, if one did (Trip.Guard).
	Guard string
	// Context are the entries the update adds to what later agents see, in full: a step's
	// output, failure or cut answer, a person's feedback or reply. They belong in the
	// transcript, not in status.
	Context []ContextEntry
	// Decided are the decisions the update applied (people's, and gates' timeouts), in order,
	// whole: the transcript keeps them, so that a run started from this one passes a gate only
	// where someone approved it (Replay).
	Decided []Decided
}

// Decided is a decision as a run applied it: the record status.approvals keeps, and a reply's
// text.
type Decided struct {
	v1alpha1.ApprovalRecord `json:",inline"`
	// Reply is a reply's text.
	Reply string `json:"reply,omitempty"`
}

// Ended reports whether the update ends the run.
func (d Update) Ended() bool { return d.Status.Phase.Terminal() }

func (d *Update) event(typ, reason, format string, args ...any) {
	d.Events = append(d.Events, Event{Type: typ, Reason: reason, Message: statusText(fmt.Sprintf(format, args...), maxMessage)})
}
