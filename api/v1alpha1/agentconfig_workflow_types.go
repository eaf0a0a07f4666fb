package v1alpha1

// The parts of an AgentConfig that say how control moves: a Scripted agent's turns, a
// supervisor's routing decisions, signals and StateMachine states.

// ScriptTurn is one deterministic answer of a Scripted agent.
type ScriptTurn struct {
	// when makes this turn eligible only for a step whose input contains it.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	When string `json:"when,omitempty"`

	// output is the text the agent answers.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Output string `json:"output,omitempty"`

	// handoff asks to hand control to this agent.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Handoff string `json:"handoff,omitempty"`

	// reason says why the agent hands off; it is recorded in the handoff sequence.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Reason string `json:"reason,omitempty"`

	// signal emits a named signal.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Signal string `json:"signal,omitempty"`

	// tokens is the usage this turn reports.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000000
	// +optional
	Tokens int64 `json:"tokens,omitempty"`

	// delay is simulated latency before the turn answers.
	// +optional
	Delay *Duration `json:"delay,omitempty"`

	// error makes this turn fail with this message.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Error string `json:"error,omitempty"`

	// finishReason is the reported finish reason; length marks a truncated answer.
	// +optional
	FinishReason FinishReason `json:"finishReason,omitempty"`

	// routing is a supervisor's routing decision.
	// +optional
	Routing *RoutingDecision `json:"routing,omitempty"`

	// toolCalls are calls the agent makes, for real and in order, before it answers with the
	// turn's output, handoff or signal.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	ToolCalls []ScriptToolCall `json:"toolCalls,omitempty"`

	// parallel hands off to several agents at once, each a branch with its own input, for an
	// agent with parallel set.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Parallel []BranchRequest `json:"parallel,omitempty"`
}

// RoutingDecision is a supervisor's choice of the next agent.
type RoutingDecision struct {
	// target is the agent chosen.
	// +kubebuilder:validation:MaxLength=63
	// +required
	// +kubebuilder:validation:MinLength=1
	Target string `json:"target,omitempty"`

	// confidence is the supervisor's confidence in the choice, from 0 to 1.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +optional
	Confidence *float64 `json:"confidence,omitempty"`

	// reason explains the choice.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Reason string `json:"reason,omitempty"`

	// fallback is the agent to use when confidence is below routing.minConfidence.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Fallback string `json:"fallback,omitempty"`
}

// Signal is a named marker an agent may emit, and what it does to the run.
type Signal struct {
	// name is the marker, e.g. TERMINATE_WORKFLOW.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_.-]*$`
	// +required
	Name string `json:"name,omitempty"`

	// action is what the signal does: Terminate, Complete, AwaitInput or None.
	// +kubebuilder:default=None
	// +optional
	Action SignalAction `json:"action,omitempty"`

	// description tells models when to emit the signal.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
}

// State is one state of a StateMachine workflow.
type State struct {
	// name identifies the state.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_.-]*$`
	// +required
	Name string `json:"name,omitempty"`

	// agent takes the step in this state. A state without an agent is final: the run ends
	// Completed when it reaches it.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Agent string `json:"agent,omitempty"`

	// transitions maps a signal to the state it leads to.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Transitions map[string]string `json:"transitions,omitempty"`

	// on is the old name of transitions, refused with a hint instead of an unknown-field
	// error. It is never valid.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="false",message="on was renamed to transitions"
	// +optional
	RenamedOn map[string]string `json:"on,omitempty"`

	// true is the old name written bare: YAML 1.1, which kubectl reads, turns an unquoted on
	// key into "true". It is refused with a hint, and never valid.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="false",message="on was renamed to transitions (YAML reads a bare on key as true)"
	// +optional
	BareOn map[string]string `json:"true,omitempty"`

	// onError is the state a failed step leads to.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	OnError string `json:"onError,omitempty"`
}
