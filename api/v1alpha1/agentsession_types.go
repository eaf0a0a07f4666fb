package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HistoryCompaction says what happens to a session's turns once they leave the history window.
// +kubebuilder:validation:Enum=Summarize;Drop
type HistoryCompaction string

const (
	// CompactionSummarize folds a turn that leaves the window into the session's summary, once:
	// a call of the summarizer agent, counted in tokens and cost, not as a step.
	CompactionSummarize HistoryCompaction = "Summarize"
	// CompactionDrop leaves a turn out of the history once it leaves the window.
	CompactionDrop HistoryCompaction = "Drop"
)

// SessionHistory says what each turn is given of the turns before it.
type SessionHistory struct {
	// maxTurns is how many of the latest turns each turn is given verbatim: their input and
	// their output. Defaults to 20.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=20
	// +optional
	MaxTurns *int32 `json:"maxTurns,omitempty"`

	// maxTokens bounds the verbatim turns, estimated as budgets estimate them (a token for
	// every two bytes): the oldest leave the window first. Defaults to 8000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +kubebuilder:default=8000
	// +optional
	MaxTokens *int64 `json:"maxTokens,omitempty"`

	// compaction is what becomes of a turn that leaves the window: Summarize (the default) or
	// Drop.
	// +kubebuilder:default=Summarize
	// +optional
	Compaction HistoryCompaction `json:"compaction,omitempty"`

	// summarizer names the agent that summarizes; the entrypoint by default. It is called with
	// no tools and no handoffs, and the call is not a step.
	// +optional
	Summarizer *SessionSummarizer `json:"summarizer,omitempty"`
}

// SessionSummarizer names the agent that summarizes a session's older turns.
type SessionSummarizer struct {
	// agent is the name of an agent of the session's config.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Agent string `json:"agent,omitempty"`
}

// SessionLimits bound a session across all its turns. Each turn gets at most what is left.
type SessionLimits struct {
	// maxTurns is the most turns the session takes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxTurns *int32 `json:"maxTurns,omitempty"`

	// maxCost is the most the session's turns may cost together, as a decimal string in the
	// currency of the config's prices.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCost *string `json:"maxCost,omitempty"`

	// maxTokens is the most tokens the session's turns, and its summaries, may use together.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000000
	// +optional
	MaxTokens *int64 `json:"maxTokens,omitempty"`
}

// AgentSessionSpec is a conversation: its team, what each turn is given of the turns before
// it, and its limits.
type AgentSessionSpec struct {
	// configRef names the AgentConfig, in the session's namespace, whose team takes every turn.
	// It cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="configRef cannot change: start another session"
	// +required
	ConfigRef ConfigReference `json:"configRef,omitzero"`

	// history is what each turn is given of the turns before it.
	// +optional
	History *SessionHistory `json:"history,omitempty"`

	// limits bound the session across all its turns; the namespace's runLimits bound them too.
	// +optional
	Limits *SessionLimits `json:"limits,omitempty"`

	// ttlSecondsAfterIdle deletes the session, its turns and their transcripts this long after
	// its last turn ended (turns ignore their own time to live). Unset, the session is kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	TTLSecondsAfterIdle *int32 `json:"ttlSecondsAfterIdle,omitempty"`
}

// SessionPhase is where a session is.
// +kubebuilder:validation:Enum=Active;Idle;Ended
type SessionPhase string

const (
	// SessionActive is a session with a turn running or waiting.
	SessionActive SessionPhase = "Active"
	// SessionIdle is a session whose turns have all ended; it takes the next one.
	SessionIdle SessionPhase = "Idle"
	// SessionEnded is a session that takes no more turns.
	SessionEnded SessionPhase = "Ended"
)

// Session end reasons, beside the budget reasons of runs (CostBudgetExceeded,
// TokenBudgetExceeded).
const (
	// SessionReasonMaxTurns ends a session that took limits.maxTurns turns.
	SessionReasonMaxTurns = "MaxTurnsExceeded"
	// SessionReasonEnded ends a session annotated agents.baton.dev/end.
	SessionReasonEnded = "Ended"
	// ReasonSessionBusy is the Progressing reason of a turn that waits Queued for the turn
	// before it.
	ReasonSessionBusy = "SessionBusy"
	// ReasonSessionNotFound is the ConfigResolved reason of a turn whose session does not exist.
	ReasonSessionNotFound = "SessionNotFound"
	// ReasonTakingTurns is the Ready reason of a session that takes turns.
	ReasonTakingTurns = "TakingTurns"
)

// Session annotations and labels.
const (
	// AnnotationEnd on an AgentSession ends it; its value is the reason people give.
	AnnotationEnd = "agents.baton.dev/end"
	// AnnotationTurn on a turn is its number in its session, set by the webhook when the turn
	// is created: turns run in this order.
	AnnotationTurn = "agents.baton.dev/turn"
	// LabelSession on a turn names its session, set by the webhook.
	LabelSession = "agents.baton.dev/session"
)

// SessionUsage is what a session's turns used, up to and including turn throughTurn.
type SessionUsage struct {
	// throughTurn is the number of the last turn counted: every turn numbered up to it has
	// ended.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ThroughTurn int64 `json:"throughTurn,omitempty"`

	// turns is how many turns were counted.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Turns int32 `json:"turns,omitempty"`

	// started is how many of the turns counted started.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Started int32 `json:"started,omitempty"`

	// tokensUsed is the tokens the counted turns used, with their summaries.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TokensUsed int64 `json:"tokensUsed,omitempty"`

	// cost is what the counted turns cost, as a decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Cost string `json:"cost,omitempty"`
}

// AgentSessionStatus is where the conversation is.
type AgentSessionStatus struct {
	// phase is Active while a turn runs or waits, Idle between turns, Ended once it takes no
	// more.
	// +optional
	Phase SessionPhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: the phase is part of the API contract and the PHASE column, as an AgentRun's; the conditions say the same for tools

	// turns is how many turns the session has taken or is taking.
	// +optional
	Turns int32 `json:"turns"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// numbered is how many turns the webhook has numbered, created or refused after: the next
	// turn is numbered one more.
	// +optional
	Numbered int32 `json:"numbered,omitempty"`

	// lastRun is the latest turn's AgentRun.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LastRun string `json:"lastRun,omitempty"`

	// state is, for a StateMachine team, where the last turn's last transition led: the next
	// turn starts there.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	State string `json:"state,omitempty"`

	// taint says where untrusted content first came into the session's conversation, once a
	// turn was tainted: every later turn starts tainted, whatever its history keeps.
	// +optional
	Taint *Taint `json:"taint,omitempty"`

	// tokensUsed is the tokens of all turns and summaries.
	// +optional
	TokensUsed int64 `json:"tokensUsed"` //nolint:kubeapilinter // optionalfields: a count of 0 is shown as 0 in kubectl get, not left blank

	// cost is what all turns cost, as a decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Cost string `json:"cost,omitempty"`

	// settled is what the session's ended turns used, up to the last of them in order, kept
	// here so that deleting an ended turn gives nothing of the session's limits back.
	// +optional
	Settled *SessionUsage `json:"settled,omitempty"`

	// endReason says why the session ended: MaxTurnsExceeded, CostBudgetExceeded,
	// TokenBudgetExceeded or Ended.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	EndReason string `json:"endReason,omitempty"`

	// endMessage says more about the end.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	EndMessage string `json:"endMessage,omitempty"`

	// endTime is when the session ended.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// idleSince is when the last turn ended; ttlSecondsAfterIdle counts from it.
	// +optional
	IdleSince *metav1.Time `json:"idleSince,omitempty"`

	// observedGeneration is the spec generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready True (TakingTurns) while the session takes turns; Stalled True, with
	// the end reason, once a limit ended it; Reconciling True while a turn runs.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentSession is a conversation that goes on: each turn is an AgentRun with spec.session,
// created by whoever speaks, given the turns before it as history and run one at a time in
// the order they were created.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=as,categories=baton
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Turns",type=integer,JSONPath=`.status.turns`
// +kubebuilder:printcolumn:name="Last Run",type=string,JSONPath=`.status.lastRun`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.tokensUsed`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.cost`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.endReason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentSession struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the conversation's team, history and limits.
	// +required
	Spec AgentSessionSpec `json:"spec,omitzero"`

	// status is where the conversation is, written by the operator.
	// +optional
	Status AgentSessionStatus `json:"status,omitempty,omitzero"`
}

// AgentSessionList is a list of AgentSessions.
// +kubebuilder:object:root=true
type AgentSessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentSession `json:"items"`
}
