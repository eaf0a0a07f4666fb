package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The records an AgentRun's status keeps: steps, loops, gates and decisions.

// HandoffRecord is one step of a run: who acted, where control went and why.
type HandoffRecord struct {
	// step is the step's number in the run, from 1.
	// +required
	// +kubebuilder:validation:Minimum=1
	Step int32 `json:"step,omitempty"`

	// from is the agent that took the step; for a join, the branches' agents, comma-separated.
	// +kubebuilder:validation:MaxLength=1040
	// +required
	// +kubebuilder:validation:MinLength=1
	From string `json:"from,omitempty"`

	// to is the agent that has control after the step; empty when the step ended the run; for
	// a fan-out, the branches' agents, comma-separated, in the order given.
	// +kubebuilder:validation:MaxLength=1040
	// +optional
	To string `json:"to,omitempty"`

	// outcome is how the step ended.
	// +optional
	Outcome StepOutcome `json:"outcome,omitempty"`

	// reason says why control moved: the agent's handoff reason, the signal, or the failure.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Reason string `json:"reason,omitempty"`

	// signal is the declared signal the step emitted.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Signal string `json:"signal,omitempty"`

	// time is when the step ended.
	// +required
	Time metav1.Time `json:"time"` //nolint:kubeapilinter // requiredfields: a time the operator always sets; its zero value is never written

	// tokens is the usage the step reported.
	// +optional
	Tokens int64 `json:"tokens,omitempty"`

	// cost is what the step cost, as a decimal string, when its endpoint has prices.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Cost string `json:"cost,omitempty"`

	// toolCalls is the number of tool calls the step made.
	// +optional
	ToolCalls int32 `json:"toolCalls,omitempty"`

	// confidence is the supervisor's confidence in the routing decision this step made.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +optional
	Confidence *float64 `json:"confidence,omitempty"`

	// inputDigest is a short digest of what the agent was given, as the loop detectors see it;
	// status leaves it out.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`

	// outputDigest is a short digest of what the agent returned, as the loop detectors see it;
	// status leaves it out.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	OutputDigest string `json:"outputDigest,omitempty"`
}

// LoopStatus is the evidence of a loop that ended a run.
type LoopStatus struct {
	// detector is the detector that found the loop.
	// +required
	Detector LoopDetector `json:"detector,omitempty"`

	// pattern is the agents that make up the loop; for RepeatedToolCall, the tool
	// (<server>/<tool>).
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=200
	// +listType=atomic
	// +optional
	Pattern []string `json:"pattern,omitempty"`

	// steps are the step numbers where the loop was seen.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Steps []int32 `json:"steps,omitempty"`
}

// PendingApproval is the gate a run waits at.
type PendingApproval struct {
	// gate is the gate's name: a gate of spec.approvals, or tool/<server>/<tool>.
	// +kubebuilder:validation:MaxLength=200
	// +required
	// +kubebuilder:validation:MinLength=1
	Gate string `json:"gate,omitempty"`

	// toolCall is the call a tool's gate holds back.
	// +optional
	ToolCall *PendingToolCall `json:"toolCall,omitempty"`

	// since is when the gate opened, to the microsecond.
	// +required
	Since metav1.MicroTime `json:"since"` //nolint:kubeapilinter // requiredfields: a time the operator always sets; its zero value is never written

	// expires is when the gate's timeout decides it (its onTimeout), if the gate has one.
	// +optional
	Expires *metav1.MicroTime `json:"expires,omitempty"`

	// approvedBy are the people who approved so far.
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	ApprovedBy []string `json:"approvedBy,omitempty"`

	// completes is set when the run ends once the gate passes: the step before the gate
	// finished the run.
	// +optional
	Completes *Completion `json:"completes,omitempty"`
}

// Completion is how a run ends once its pending gate passes.
type Completion struct {
	// reason is the termination reason, Completed or Terminated.
	// +required
	Reason TerminationReason `json:"reason,omitempty"`

	// message is the termination message.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// state is the StateMachine's final state the run reaches once the gate lets it complete.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	State string `json:"state,omitempty"`
}

// PendingToolCall is a tool call that waits for approval.
type PendingToolCall struct {
	// server is the tool's server.
	// +kubebuilder:validation:MaxLength=63
	// +required
	// +kubebuilder:validation:MinLength=1
	Server string `json:"server,omitempty"`

	// tool is the tool's name.
	// +kubebuilder:validation:MaxLength=128
	// +required
	// +kubebuilder:validation:MinLength=1
	Tool string `json:"tool,omitempty"`

	// step is the step that asked for the call.
	// +required
	// +kubebuilder:validation:Minimum=1
	Step int32 `json:"step,omitempty"`

	// call is the call's number within its step, from 1.
	// +required
	// +kubebuilder:validation:Minimum=1
	Call int32 `json:"call,omitempty"`

	// arguments are the call's arguments, as JSON. Bounded; in full in the transcript.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Arguments string `json:"arguments,omitempty"`
}

// PendingInput is an agent's question that waits for a reply.
type PendingInput struct {
	// agent asked the question and gets the reply.
	// +kubebuilder:validation:MaxLength=63
	// +required
	// +kubebuilder:validation:MinLength=1
	Agent string `json:"agent,omitempty"`

	// question is what the agent asked. Bounded.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Question string `json:"question,omitempty"`

	// since is when the run started waiting, to the microsecond.
	// +required
	Since metav1.MicroTime `json:"since"` //nolint:kubeapilinter // requiredfields: a time the operator always sets; its zero value is never written
}

// ApprovalRecord is one human decision.
type ApprovalRecord struct {
	// gate is the gate decided on; empty for a reply.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	Gate string `json:"gate,omitempty"`

	// step is the step of the tool call a tool's gate held back.
	// +optional
	Step int32 `json:"step,omitempty"`

	// toolCall is the number, within its step, of the tool call a tool's gate held back.
	// +optional
	ToolCall int32 `json:"toolCall,omitempty"`

	// decision is Approved, Rejected or Replied.
	// +kubebuilder:validation:Enum=Approved;Rejected;Replied
	// +required
	Decision string `json:"decision,omitempty"`

	// revise is where a rejection sent the run: an agent, or replan.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Revise string `json:"revise,omitempty"`

	// by is who decided.
	// +kubebuilder:validation:MaxLength=253
	// +required
	// +kubebuilder:validation:MinLength=1
	By string `json:"by,omitempty"`

	// time is when the decision was applied.
	// +required
	Time metav1.Time `json:"time"` //nolint:kubeapilinter // requiredfields: a time the operator always sets; its zero value is never written

	// feedback is the text that went with the decision.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Feedback string `json:"feedback,omitempty"`
}
