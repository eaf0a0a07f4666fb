package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations a person sets on an AgentRun with kubectl annotate.
const (
	// AnnotationCancel ends the run Cancelled; its value is the reason.
	AnnotationCancel = "agents.baton.dev/cancel"
	// AnnotationApprove approves the pending gate it names.
	AnnotationApprove = "agents.baton.dev/approve"
	// AnnotationReject rejects the pending gate it names.
	AnnotationReject = "agents.baton.dev/reject"
	// AnnotationRevise, with a reject, sends the run back to the agent it names (or replan).
	AnnotationRevise = "agents.baton.dev/revise"
	// AnnotationFeedback goes with an approve, reject or reply; the next agent sees it.
	AnnotationFeedback = "agents.baton.dev/feedback"
	// AnnotationReply answers a run that is AwaitingInput.
	AnnotationReply = "agents.baton.dev/reply"
	// AnnotationDecisions holds decisions queued for the operator, oldest first, as JSON. Only
	// Baton writes it: its admission webhook moves each approve, reject or reply annotation
	// there, stamped with who made it, so that no decision is lost or overwritten while the
	// operator is away.
	AnnotationDecisions = "agents.baton.dev/decisions"
	// AnnotationCreatedBy is the Kubernetes user who created the run. Only Baton writes it: its
	// admission webhook sets it on create, whatever the request carried (but for a run the
	// operator starts for an A2A message, which names the message's authenticated sender), and
	// refuses any later change, so that a gate with allowSelfApproval: false can tell the
	// creator from others.
	AnnotationCreatedBy = "agents.baton.dev/created-by"
)

// LabelAPIKey is the label that, set to "true", marks the Secrets that agents and tool servers may take their API
// keys and headers from. The operator lists and watches only Secrets with this label: an
// AgentConfig cannot send any other Secret's data anywhere.
const LabelAPIKey = "agents.baton.dev/api-key"

// ApproveVerb is the RBAC verb on agentruns that approving or rejecting a gate needs (the
// ClusterRole baton-approver grants it). The admission webhook checks it for the person who
// decides; the console asks it to know whom a gate waits for.
const ApproveVerb = "approve"

// RunPhase is where a run is in its life.
// +kubebuilder:validation:Enum=Pending;Queued;Running;AwaitingApproval;AwaitingInput;Succeeded;Failed;Cancelled
type RunPhase string

const (
	// PhasePending is a run not started yet, e.g. waiting for its AgentConfig.
	PhasePending RunPhase = "Pending"
	// PhaseQueued is a run waiting for room in its namespace's AgentQuota, or for Kueue to
	// admit it; it has not started.
	PhaseQueued RunPhase = "Queued"
	// PhaseRunning is a run whose agents are taking steps.
	PhaseRunning RunPhase = "Running"
	// PhaseAwaitingApproval is a run waiting at a human gate.
	PhaseAwaitingApproval RunPhase = "AwaitingApproval"
	// PhaseAwaitingInput is a run waiting for a person's reply.
	PhaseAwaitingInput RunPhase = "AwaitingInput"
	// PhaseSucceeded is a run that ended Completed or Terminated. Terminal.
	PhaseSucceeded RunPhase = "Succeeded"
	// PhaseFailed is a run ended by a limit, a detector, an error or a rejection. Terminal.
	PhaseFailed RunPhase = "Failed"
	// PhaseCancelled is a run ended by the cancel annotation. Terminal.
	PhaseCancelled RunPhase = "Cancelled"
)

// Started reports whether a run in this phase has pinned its config and begun.
func (p RunPhase) Started() bool {
	return p != "" && p != PhasePending && p != PhaseQueued
}

// Terminal reports whether a run in this phase has ended for good.
func (p RunPhase) Terminal() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseCancelled
}

// TerminationReason says why a run ended.
// +kubebuilder:validation:Enum=Completed;Terminated;MaxHandoffsExceeded;MaxStepsExceeded;AgentStepLimitExceeded;TokenBudgetExceeded;Timeout;AgentTimeout;LoopDetected;RoutingExhausted;TooManyErrors;InvalidOutput;Cancelled;Rejected;ApprovalExpired;ConfigInvalid;ToolCallLimitExceeded;TranscriptBudgetExceeded;CostBudgetExceeded;WrappedUp;Evicted;BranchFailed;Replayed;ReplayBudgetExceeded;SessionEnded
type TerminationReason string

// The reasons a run ends; docs/guards.md says which limit, detector or decision gives each,
// and Phase which phase it ends in.
const (
	ReasonCompleted              TerminationReason = "Completed"
	ReasonTerminated             TerminationReason = "Terminated"
	ReasonMaxHandoffsExceeded    TerminationReason = "MaxHandoffsExceeded"
	ReasonMaxStepsExceeded       TerminationReason = "MaxStepsExceeded"
	ReasonAgentStepLimitExceeded TerminationReason = "AgentStepLimitExceeded"
	ReasonTokenBudgetExceeded    TerminationReason = "TokenBudgetExceeded"
	ReasonTimeout                TerminationReason = "Timeout"
	ReasonAgentTimeout           TerminationReason = "AgentTimeout"
	ReasonLoopDetected           TerminationReason = "LoopDetected"
	ReasonRoutingExhausted       TerminationReason = "RoutingExhausted"
	ReasonTooManyErrors          TerminationReason = "TooManyErrors"
	ReasonInvalidOutput          TerminationReason = "InvalidOutput"
	ReasonCancelled              TerminationReason = "Cancelled"
	ReasonRejected               TerminationReason = "Rejected"
	ReasonApprovalExpired        TerminationReason = "ApprovalExpired"
	ReasonConfigInvalid          TerminationReason = "ConfigInvalid"
	ReasonToolCallLimitExceeded  TerminationReason = "ToolCallLimitExceeded"
	// ReasonTranscriptBudgetExceeded ends a run whose transcript holds limits.maxTranscriptBytes.
	ReasonTranscriptBudgetExceeded TerminationReason = "TranscriptBudgetExceeded"
	// ReasonCostBudgetExceeded ends a run whose next model call could pass limits.maxCost.
	ReasonCostBudgetExceeded TerminationReason = "CostBudgetExceeded"
	// ReasonWrappedUp ends a run Succeeded whose wrap-up agent answered when a limit ran out.
	ReasonWrappedUp TerminationReason = "WrappedUp"
	// ReasonEvicted ends a run that Kueue admitted when Kueue takes the admission back.
	ReasonEvicted TerminationReason = "Evicted"
	// ReasonBranchFailed ends a run one of whose branches failed, with join.onFailure Fail, or
	// whose join timed out.
	ReasonBranchFailed TerminationReason = "BranchFailed"
	// ReasonReplayed ends a run that replayed a recorded one (spec.replay) Succeeded.
	ReasonReplayed TerminationReason = "Replayed"
	// ReasonReplayBudgetExceeded ends a replay (spec.replay) whose recorded run holds more than
	// a replay may read (the operator's replay byte budget, or the export's bounds), or whose
	// replay was begun three times and never ended.
	ReasonReplayBudgetExceeded TerminationReason = "ReplayBudgetExceeded"
	// ReasonSessionEnded ends a turn of a session that ended before the turn could start.
	ReasonSessionEnded TerminationReason = "SessionEnded"
)

// Phase is the terminal phase a run ends in for this reason.
func (r TerminationReason) Phase() RunPhase {
	switch r {
	case ReasonCompleted, ReasonTerminated, ReasonWrappedUp, ReasonReplayed:
		return PhaseSucceeded
	case ReasonCancelled:
		return PhaseCancelled
	default:
		return PhaseFailed
	}
}

// ApprovalPolicy says whether a run stops at the config's human gates.
// +kubebuilder:validation:Enum=Required;Skip
type ApprovalPolicy string

const (
	// ApprovalsRequired makes the run wait at every gate.
	ApprovalsRequired ApprovalPolicy = "Required"
	// ApprovalsSkip runs without the gates.
	ApprovalsSkip ApprovalPolicy = "Skip"
)

// StepOutcome is how one step ended.
// +kubebuilder:validation:Enum=Handoff;Returned;Signal;Final;Truncated;Invalid;Failed;FanOut;Joined
type StepOutcome string

const (
	// OutcomeHandoff is a step whose agent handed control to another agent.
	OutcomeHandoff StepOutcome = "Handoff"
	// OutcomeReturned is a step whose agent answered without a handoff; control went back to
	// the entrypoint or supervisor.
	OutcomeReturned StepOutcome = "Returned"
	// OutcomeSignal is a step whose agent emitted a signal that ended, paused or routed the run.
	OutcomeSignal StepOutcome = "Signal"
	// OutcomeFinal is a step whose agent's answer is the run's final answer.
	OutcomeFinal StepOutcome = "Final"
	// OutcomeTruncated is a step whose answer was cut at the output-token limit; the agent is
	// asked again.
	OutcomeTruncated StepOutcome = "Truncated"
	// OutcomeInvalid is a step whose answer did not match the agent's outputSchema; the agent
	// is asked to repair it.
	OutcomeInvalid StepOutcome = "Invalid"
	// OutcomeFailed is a step that errored, timed out or asked for a refused handoff.
	OutcomeFailed StepOutcome = "Failed"
	// OutcomeFanOut is a step whose agent handed off to several agents at once, each a branch.
	OutcomeFanOut StepOutcome = "FanOut"
	// OutcomeJoined records a fan-out's join: the branches' outputs went to the join agent.
	OutcomeJoined StepOutcome = "Joined"
)

// LoopDetector names the detector that found a loop.
// +kubebuilder:validation:Enum=Window;Cycle;RepeatedInput;RepeatedOutput;RepeatedToolCall
type LoopDetector string

// The loop detectors; docs/guards.md says what each looks for.
const (
	DetectorWindow         LoopDetector = "Window"
	DetectorCycle          LoopDetector = "Cycle"
	DetectorRepeatedInput  LoopDetector = "RepeatedInput"
	DetectorRepeatedOutput LoopDetector = "RepeatedOutput"
	// DetectorRepeatedToolCall finds the same tool called with the same arguments too often.
	DetectorRepeatedToolCall LoopDetector = "RepeatedToolCall"
)

// Condition types of an AgentRun, beside ConditionReady, which it shares with AgentConfig.
const (
	// ConditionConfigResolved is True once the run's AgentConfig is found, valid and pinned.
	// Reasons: ConfigPinned; ConfigNotFound while the config does not exist and SecretNotFound
	// while a Secret its agents need cannot be read (the run waits Pending); ConfigInvalid
	// when the config cannot be used (the run ends).
	ConditionConfigResolved = "ConfigResolved"
	// ConditionProgressing is True while the run can still take steps (reason: its phase) and
	// False once it ended (reason: its termination reason).
	ConditionProgressing = "Progressing"
	// ConditionReconciling is True while the run can still change: Pending, Running, or
	// waiting for a person (reason: its phase). It is removed when the run ends. kstatus (Flux,
	// Argo CD, kpt) reads it as InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the run ended Failed or Cancelled, with the termination
	// reason and message; absent otherwise. An AgentConfig runs cannot start with has it too,
	// reason ConfigInvalid. kstatus reads it as Failed.
	ConditionStalled = "Stalled"
	// ConditionDecision says what became of the latest human decision: True, reason Applied,
	// when it took effect; False when it changed nothing, with the reason (NotWaiting,
	// GateNotPending, AlreadyApproved, SelfApprovalNotAllowed, InvalidValue, UnknownAgent) and
	// what was expected.
	ConditionDecision = "Decision"
	// ConditionTokenBudgetWarning is set True, once, when the tokens used reach
	// limits.tokenWarningPercent of limits.maxTokens. Reason: ThresholdReached.
	ConditionTokenBudgetWarning = "TokenBudgetWarning"
	// ConditionCostBudgetWarning is set True, once, when the run's cost reaches 90% of
	// limits.maxCost. Reason: ThresholdReached.
	ConditionCostBudgetWarning = "CostBudgetWarning"
)

// Condition reasons that are not termination reasons.
const (
	ReasonConfigPinned   = "ConfigPinned"
	ReasonConfigNotFound = "ConfigNotFound"
	// ReasonSecretNotFound keeps a run Pending while a Secret its agents need cannot be read.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonThresholdReached is the TokenBudgetWarning and CostBudgetWarning reason.
	ReasonThresholdReached = "ThresholdReached"
	// ReasonRateLimited is the Progressing reason of a Running run whose step waits for its
	// model endpoint's capacity.
	ReasonRateLimited = "RateLimited"
	// ReasonQuotaExceeded is the Progressing reason of a Queued run waiting for room in an
	// AgentQuota (named in the message, with the run's place in line).
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonAwaitingAdmission is the Progressing reason of a Queued run waiting for Kueue to
	// admit its Workload.
	ReasonAwaitingAdmission = "AwaitingAdmission"
	// ReasonWrappingUp is the Progressing reason of a run whose limit ran out and whose
	// limits.wrapUp agent has the last turn.
	ReasonWrappingUp = "WrappingUp"
	// Decision condition reasons.
	ReasonApplied         = "Applied"
	ReasonNotWaiting      = "NotWaiting"
	ReasonGateNotPending  = "GateNotPending"
	ReasonAlreadyApproved = "AlreadyApproved"
	ReasonInvalidValue    = "InvalidValue"
	ReasonUnknownAgent    = "UnknownAgent"
	// ReasonSelfApproval refuses an approval by the run's creator (or when the creator is not
	// known) at a gate with allowSelfApproval: false.
	ReasonSelfApproval = "SelfApprovalNotAllowed"
)

// AgentRun is one execution of an AgentConfig's team on one input.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ar;run,categories=baton
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.status.currentAgent`
// +kubebuilder:printcolumn:name="Handoffs",type=integer,JSONPath=`.status.handoffCount`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.tokensUsed`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.cost`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.terminationReason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.branch.parent`,priority=1
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.spec.configRef.name`,priority=1
// +kubebuilder:printcolumn:name="Steps",type=integer,JSONPath=`.status.stepCount`,priority=1
// +kubebuilder:printcolumn:name="Errors",type=integer,JSONPath=`.status.errorCount`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.terminationMessage`,priority=1
type AgentRun struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to run. Immutable once the run has started.
	// +required
	Spec AgentRunSpec `json:"spec,omitzero"`

	// status is the run's progress, written only by the operator.
	// +optional
	Status AgentRunStatus `json:"status,omitempty,omitzero"`
}

// AgentRunList is a list of AgentRuns.
// +kubebuilder:object:root=true
type AgentRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentRun `json:"items"`
}

// AgentRunSpec is what to run. The immutability rule is the spec's own, not the object's: the
// API server then evaluates it over the spec alone, not over the whole run, on each status write.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: to change a run, create another (kubectl baton retry copies one)",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.replay) || (!has(self.from) && !has(self.branch))",message="replay replays a recorded run from its start: it goes with neither from nor branch"
// +kubebuilder:validation:XValidation:rule="!has(self.replay) || (!has(self.limits) && (!has(self.approvals) || self.approvals == 'Required'))",message="replay replays the recorded run under the recorded run's own limits and approvals: set neither limits nor approvals: Skip"
// +kubebuilder:validation:XValidation:rule="!has(self.session) || (!has(self.from) && !has(self.replay) && !has(self.branch))",message="a turn of a session goes on from the turns before it: it carries no from, replay or branch"
type AgentRunSpec struct {
	// configRef names the AgentConfig, in the run's namespace, whose team runs.
	// +required
	ConfigRef ConfigReference `json:"configRef,omitzero"`

	// input is the task given to the entrypoint agent.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Input string `json:"input,omitempty"`

	// limits override the config's limits for this run.
	// +optional
	Limits *LimitOverrides `json:"limits,omitempty"`

	// approvals says whether the run stops at the config's human gates: Required or Skip.
	// +kubebuilder:default=Required
	// +optional
	Approvals ApprovalPolicy `json:"approvals,omitempty"`

	// from starts the run where an earlier run of the namespace was after one of its steps:
	// with that run's transcript up to the step, its counts and context, the config it pinned,
	// and the agent that had control then. input, when set, is a new instruction for that
	// agent. The earlier run is not changed.
	// +optional
	From *RunFrom `json:"from,omitempty"`

	// priority orders runs that wait Queued for room in their namespace's AgentQuota: higher
	// first, then the earlier created. Defaults to 0.
	// +kubebuilder:validation:Minimum=-1000000
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// priorityClassName names the Kueue WorkloadPriorityClass of the run's Workload: one of the
	// priorityClasses of its namespace's AgentQuotas (another is refused at create). Unset, the
	// run gets the first class listed, if any.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ttlSecondsAfterFinished deletes the run, and its transcript, this long after it ended.
	// Defaults to the config's ttlSecondsAfterFinished; unset in both, the run is kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// branch makes the run a branch of another run's fan-out. Only the operator sets it, when
	// it creates a branch; a run whose parent does not list it is refused.
	// +optional
	Branch *RunBranch `json:"branch,omitempty"`

	// replay replays a recorded run of the namespace on the config as it is now: each agent
	// answers with its recorded turns, people's recorded decisions pass the gates the config
	// now counts them for, and no agent or tool is called. The run ends Succeeded, reason
	// Replayed, with what the replay found in status.replay.
	// +optional
	Replay *RunReplay `json:"replay,omitempty"`

	// session makes the run a turn of an AgentSession of its namespace: it is given the turns
	// before it as history and runs once they have ended. configRef defaults to the session's
	// (another is refused); creating a turn needs get on the session.
	// +optional
	Session *SessionReference `json:"session,omitempty"`
}

// SessionReference names an AgentSession of the run's namespace.
type SessionReference struct {
	// name is the AgentSession's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
}

// RunFrom names an earlier run and the step after which to continue it.
type RunFrom struct {
	// run is the earlier AgentRun's name, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Run string `json:"run,omitempty"`

	// step is the step after which to continue, from 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	Step int32 `json:"step,omitempty"`
}

// ConfigReference names an AgentConfig in the same namespace.
type ConfigReference struct {
	// name is the AgentConfig's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
}

// LimitOverrides override a config's limits for one run. Unset fields keep the config's value.
type LimitOverrides struct {
	// maxHandoffs overrides limits.maxHandoffs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxHandoffs *int32 `json:"maxHandoffs,omitempty"`

	// maxSteps overrides limits.maxSteps.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxSteps *int32 `json:"maxSteps,omitempty"`

	// maxTokens overrides limits.maxTokens.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000000
	// +optional
	MaxTokens *int64 `json:"maxTokens,omitempty"`

	// tokenWarningPercent overrides limits.tokenWarningPercent.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	TokenWarningPercent *int32 `json:"tokenWarningPercent,omitempty"`

	// timeout overrides limits.timeout.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// agentTimeout overrides limits.agentTimeout.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	AgentTimeout *Duration `json:"agentTimeout,omitempty"`

	// maxErrors overrides limits.maxErrors.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxErrors *int32 `json:"maxErrors,omitempty"`

	// maxHandoffDepth overrides limits.maxHandoffDepth.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxHandoffDepth *int32 `json:"maxHandoffDepth,omitempty"`

	// maxToolCalls overrides limits.maxToolCalls.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxToolCalls *int32 `json:"maxToolCalls,omitempty"`

	// maxTranscriptBytes overrides limits.maxTranscriptBytes.
	// +kubebuilder:validation:Minimum=1048576
	// +kubebuilder:validation:Maximum=17179869184
	// +optional
	MaxTranscriptBytes *int64 `json:"maxTranscriptBytes,omitempty"`

	// maxCost overrides limits.maxCost.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCost *string `json:"maxCost,omitempty"`

	// maxBranches overrides limits.maxBranches.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxBranches *int32 `json:"maxBranches,omitempty"`

	// maxDepth overrides limits.maxDepth.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	MaxDepth *int32 `json:"maxDepth,omitempty"`
}
