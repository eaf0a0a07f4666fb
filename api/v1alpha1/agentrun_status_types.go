package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An AgentRun's status, and the records it keeps: steps, loops, gates and decisions.

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
	// gate is the gate's name: a gate of spec.approvals, tool/<server>/<tool>,
	// taint/<server>/<tool> for a tainted call of a tool with side effects, or guard/<guardrail>
	// for a text a guardrail asked a person to review.
	// +kubebuilder:validation:MaxLength=200
	// +required
	// +kubebuilder:validation:MinLength=1
	Gate string `json:"gate,omitempty"`

	// toolCall is the call a tool's gate holds back.
	// +optional
	ToolCall *PendingToolCall `json:"toolCall,omitempty"`

	// guard is the text a guardrail's gate (guard/<guardrail>) holds back for review.
	// +optional
	Guard *PendingGuard `json:"guard,omitempty"`

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

	// taint is where the untrusted content in the call's context came from, for a call held at
	// its taint/ gate.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Taint string `json:"taint,omitempty"`
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

	// toolCall is the number, within its step, of the tool call a tool's gate held back; at a
	// guardrail's gate, where in the step its text came (status.pendingApproval.guard.call).
	// +optional
	ToolCall int32 `json:"toolCall,omitempty"`

	// decision is Approved, Rejected, Replied or TimedOut (a gate whose timeout let the run go
	// on, with nobody's decision).
	// +kubebuilder:validation:Enum=Approved;Rejected;Replied;TimedOut
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

// AgentRunStatus is a run's progress. It stays small however long the run: the handoff
// sequence keeps only its latest entries and no step's output piles up in it.
type AgentRunStatus struct {
	// phase is where the run is: Pending, Queued, Running, AwaitingApproval, AwaitingInput, or
	// one of the terminal phases Succeeded, Failed and Cancelled.
	// +optional
	Phase RunPhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: the phase is part of the API contract and the PHASE column; the conditions say the same for tools

	// state is the StateMachine state, else the current agent's name.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	State string `json:"state,omitempty"`

	// currentAgent is the agent that takes the next step (or took the last one); while the
	// run waits for its branches, their agents, comma-separated.
	// +kubebuilder:validation:MaxLength=1040
	// +optional
	CurrentAgent string `json:"currentAgent,omitempty"`

	// configRevision names the pinned snapshot of the AgentConfig this run uses.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ConfigRevision string `json:"configRevision,omitempty"`

	// stepCount is the number of agent steps taken.
	// +optional
	StepCount int32 `json:"stepCount,omitempty"`

	// handoffCount is the number of times control passed to an agent.
	// +optional
	HandoffCount int32 `json:"handoffCount,omitempty"`

	// tokensUsed is the total tokens the steps reported.
	// +optional
	TokensUsed int64 `json:"tokensUsed,omitempty"`

	// cost is what the run's steps cost, as a decimal string in currency, from their
	// endpoints' prices.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Cost string `json:"cost,omitempty"`

	// currency is the ISO 4217 code of cost, from the endpoints' prices.
	// +kubebuilder:validation:MaxLength=3
	// +optional
	Currency string `json:"currency,omitempty"`

	// toolCalls is the number of tool calls the run's steps made.
	// +optional
	ToolCalls int32 `json:"toolCalls,omitempty"`

	// transcriptBytes is what the run's steps and tool calls take in its transcript, in bytes
	// as stored (limits.maxTranscriptBytes bounds it).
	// +optional
	TranscriptBytes int64 `json:"transcriptBytes,omitempty"`

	// errorCount is the number of failed steps.
	// +optional
	ErrorCount int32 `json:"errorCount,omitempty"`

	// branchSteps is the steps the run's joined branches took: they count against maxSteps
	// with the run's own (stepCount). The branches' tokens, cost and tool calls are in
	// tokensUsed, cost and toolCalls.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BranchSteps int32 `json:"branchSteps,omitempty"`

	// branches are the branches of the run's current or latest fan-out, in the order given.
	// Only the operator writes a run's status, always the whole list: atomic, so the API server
	// does not track each entry's fields on every write.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Branches []BranchStatus `json:"branches,omitempty"`

	// replay is what the replay of a recorded run found (spec.replay).
	// +optional
	Replay *ReplayStatus `json:"replay,omitempty"`

	// branchesStarted counts the branches the run started, against limits.maxBranches.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BranchesStarted int32 `json:"branchesStarted,omitempty"`

	// waited is the time the run spent waiting for people (approvals and replies) and held at
	// its namespace's cost and token caps; it does not count against limits.timeout.
	// +optional
	Waited *Duration `json:"waited,omitempty"`

	// quotaHold is set while the run, started, waits at a cost or token cap of its namespace's
	// AgentQuotas: its next model call is not made until the period resets or the cap is raised.
	// +optional
	QuotaHold *QuotaHold `json:"quotaHold,omitempty"`

	// limits are the run's effective limits where its namespace's AgentQuotas bound them
	// (runLimits), and which quota set each one; written when the run starts.
	// +optional
	Limits *EffectiveLimits `json:"limits,omitempty"`

	// kueue is set once the run's Workload was made: the run is Kueue's to admit from then
	// on, whatever its labels say later.
	// +optional
	Kueue *KueueAdmission `json:"kueue,omitempty"`

	// depth is how deeply the current agent was delegated to below the supervisor (Supervisor
	// mode); limits.maxHandoffDepth bounds it.
	// +optional
	Depth int32 `json:"depth,omitempty"`

	// reroutes counts the child steps that failed in a row and went back to the supervisor
	// (Supervisor mode); past routing.maxReroutes the run ends RoutingExhausted.
	// +optional
	Reroutes int32 `json:"reroutes,omitempty"`

	// lastDecision is the sequence number of the latest queued human decision the run has
	// taken, so that no decision is applied twice.
	// +optional
	LastDecision int64 `json:"lastDecision,omitempty"`

	// agentSteps counts the steps each agent has taken.
	// +kubebuilder:validation:MaxProperties=32
	// +mapType=atomic
	// +optional
	AgentSteps map[string]int32 `json:"agentSteps,omitempty"` //nolint:kubeapilinter // nomaps: a merge patch of a map carries only the agent whose count changed; a list would be resent whole with every step

	// handoffSequence has one entry per step, oldest first. Only the latest 10 are kept, without
	// digests; step numbers say where they fall in the run. The transcript holds every step.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	HandoffSequence []HandoffRecord `json:"handoffSequence,omitempty"`

	// input is what the current agent is given for its next step: the run's input, the
	// previous agent's output or a note on a failed step. Status holds its first 512 bytes; a
	// longer input is cut, and inputDigest is set (the transcript holds it whole).
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Input string `json:"input,omitempty"`

	// inputDigest is a short digest of the whole input, set when input holds only its
	// beginning.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`

	// historyDigest is, for a turn of a session, a short digest of the history it was given:
	// the loop detectors that see across turns compare its steps with those of the earlier
	// turns given the same history.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	HistoryDigest string `json:"historyDigest,omitempty"`

	// taint says where untrusted content first came into the run's context, once it has: from
	// then on the run's calls of tools with side effects meet spec.untrusted.onSideEffect.
	// +optional
	Taint *Taint `json:"taint,omitempty"`

	// terminationReason says why the run ended. Set once, with the terminal phase.
	// +optional
	TerminationReason TerminationReason `json:"terminationReason,omitempty"`

	// terminationMessage says in words why the run ended, naming the evidence.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	TerminationMessage string `json:"terminationMessage,omitempty"`

	// loop is set when a loop detector ended the run.
	// +optional
	Loop *LoopStatus `json:"loop,omitempty"`

	// wrappingUp is set when a limit ran out and limits.wrapUp's agent has the run's last turn:
	// the limit, and the guard's message as evidence.
	// +optional
	WrappingUp *WrappingUp `json:"wrappingUp,omitempty"`

	// output is the run's final answer. Bounded.
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	Output string `json:"output,omitempty"`

	// pendingApproval is the gate the run waits at.
	// +optional
	PendingApproval *PendingApproval `json:"pendingApproval,omitempty"`

	// pendingInput is the question of an agent that waits for a reply.
	// +optional
	PendingInput *PendingInput `json:"pendingInput,omitempty"`

	// approvals records every human decision, oldest first (the latest 64).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Approvals []ApprovalRecord `json:"approvals,omitempty"`

	// startTime is when the run started, to the microsecond: the run's deadline counts from it.
	// +optional
	StartTime *metav1.MicroTime `json:"startTime,omitempty"`

	// completionTime is when the run ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// observedGeneration is the spec generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are ConfigResolved, Progressing, Reconciling, Stalled, Ready, Decision,
	// TokenBudgetWarning and CostBudgetWarning. Progressing is True while the run can take steps
	// (reason RateLimited while a step waits for its endpoint's capacity, QuotaExceeded while
	// the run waits Queued) and False once it ended; Reconciling, Stalled and Ready are what
	// kstatus reads (Reconciling while the run can still change, Stalled once it failed or was
	// cancelled, Ready once it succeeded); Decision says what the latest human decision did;
	// TokenBudgetWarning is set once, at limits.tokenWarningPercent, CostBudgetWarning once, at
	// 90% of limits.maxCost. Each carries the observedGeneration it was written for.
	// Only the operator writes a run's status, always the whole list: atomic, so the API server
	// does not track each condition's fields on every write (docs/design/status-write-cost.md).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"` //nolint:kubeapilinter // conditions: atomic, as only the operator writes a run's status; a map list costs each status write its conditions' fields in managed fields
}

// WrappingUp is the limit that ran out of a run whose wrap-up agent has its last turn.
type WrappingUp struct {
	// limit is the termination reason the limit would have ended the run with.
	// +required
	Limit TerminationReason `json:"limit,omitempty"`

	// message says which limit ran out, naming the evidence.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// QuotaHold is a cap of its namespace that a started run waits at.
type QuotaHold struct {
	// quota is the AgentQuota whose cap holds the run.
	// +kubebuilder:validation:MaxLength=253
	// +required
	// +kubebuilder:validation:MinLength=1
	Quota string `json:"quota,omitempty"`

	// since is when the run began to wait, to the microsecond.
	// +required
	Since metav1.MicroTime `json:"since"` //nolint:kubeapilinter // requiredfields: a time the operator always sets; its zero value is never written

	// until is when the cap's period resets (the next UTC day or month), if the period's reset
	// frees the run.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}

// EffectiveLimits are a run's limits after its config, its overrides and its namespace's
// AgentQuotas' runLimits.
type EffectiveLimits struct {
	// maxSteps is the most steps the run may take.
	// +optional
	MaxSteps int32 `json:"maxSteps,omitempty"`

	// maxTokens is the most tokens the run may use.
	// +optional
	MaxTokens int64 `json:"maxTokens,omitempty"`

	// maxCost is the most the run may spend, as a decimal string; empty when unbounded.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	MaxCost string `json:"maxCost,omitempty"`

	// timeout is how long the run may take, waits for people aside.
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// maxTranscriptBytes is the most the run's transcript may take.
	// +optional
	MaxTranscriptBytes int64 `json:"maxTranscriptBytes,omitempty"`

	// maxBranches is the most branches the run may start.
	// +optional
	MaxBranches int32 `json:"maxBranches,omitempty"`

	// maxDepth is how deep the run's branches may nest.
	// +optional
	MaxDepth int32 `json:"maxDepth,omitempty"`

	// setBy names, for each limit a quota lowered, the quota that set it.
	// +listType=map
	// +listMapKey=limit
	// +kubebuilder:validation:MaxItems=8
	// +optional
	SetBy []LimitSource `json:"setBy,omitempty"`
}

// LimitSource is the AgentQuota that set one of a run's limits.
type LimitSource struct {
	// limit is the limit's name: maxCost, maxSteps, maxTokens, timeout, maxTranscriptBytes,
	// maxBranches or maxDepth.
	// +kubebuilder:validation:Enum=maxCost;maxSteps;maxTokens;timeout;maxTranscriptBytes;maxBranches;maxDepth
	// +required
	Limit string `json:"limit,omitempty"`

	// quota is the AgentQuota's name, or AgentSession/<name> for the session of a turn that
	// gets only what is left of its session's limits.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=266
	// +required
	Quota string `json:"quota,omitempty"`
}

// KueueAdmission is what a run remembers of its Workload.
type KueueAdmission struct {
	// workload is the run's Workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Workload string `json:"workload,omitempty"`

	// queue is the LocalQueue the Workload waits in.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Queue string `json:"queue,omitempty"`

	// priorityClassName is the WorkloadPriorityClass the Workload was made with.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// priority is the Workload's priority: spec.priority clamped to the namespace's priority
	// classes' values.
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// admitted is set once Kueue admitted the Workload; an admitted run finishes its Workload
	// when it ends, and stops if Kueue evicts it.
	// +optional
	Admitted bool `json:"admitted,omitempty"`
}
