package v1alpha1

// What bounds and shapes an AgentConfig's runs: limits, loop detection, human gates, routing.

// Limits bound a run. Every field is optional; the defaults are those shown.
type Limits struct {
	// maxHandoffs is the most times control may pass between agents. Defaults to 20.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxHandoffs *int32 `json:"maxHandoffs,omitempty"`

	// maxSteps is the most agent steps in a run. Defaults to 25.
	// +kubebuilder:default=25
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxSteps *int32 `json:"maxSteps,omitempty"`

	// maxTokens is the token budget of a run. Defaults to 50000.
	// +kubebuilder:default=50000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000000
	// +optional
	MaxTokens *int64 `json:"maxTokens,omitempty"`

	// tokenWarningPercent is the share of maxTokens at which the run warns once. Defaults to 90.
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	TokenWarningPercent *int32 `json:"tokenWarningPercent,omitempty"`

	// timeout is the run's wall-clock limit, time waiting for approvals excluded. Defaults to 10m.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// agentTimeout is the deadline of one agent step. Defaults to 2m.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	AgentTimeout *Duration `json:"agentTimeout,omitempty"`

	// maxErrors is the number of failed steps that ends a run. Defaults to 5.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxErrors *int32 `json:"maxErrors,omitempty"`

	// maxHandoffDepth is the deepest nested delegation in Supervisor mode. Defaults to 5.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxHandoffDepth *int32 `json:"maxHandoffDepth,omitempty"`

	// maxToolCalls is the most tool calls in a run; the call past it ends the run
	// ToolCallLimitExceeded. Defaults to 100.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxToolCalls *int32 `json:"maxToolCalls,omitempty"`

	// maxTranscriptBytes is what a run's transcript may hold, in bytes as stored: its steps'
	// records and their tool calls'. A step is not started once the run's transcript holds this
	// much; the run ends TranscriptBudgetExceeded. Defaults to 64Mi (67108864).
	// +kubebuilder:default=67108864
	// +kubebuilder:validation:Minimum=1048576
	// +kubebuilder:validation:Maximum=17179869184
	// +optional
	MaxTranscriptBytes *int64 `json:"maxTranscriptBytes,omitempty"`

	// maxCost is what a run may spend, as a decimal string in its endpoints' currency (each
	// step's cost comes from its ModelEndpoint's prices). Before each model call, the call's
	// worst case (its prompt and its whole output cap at full price) is added to what the run
	// spent: a call that could pass maxCost is not made, and the run ends CostBudgetExceeded
	// (or wraps up). The run warns once at 90% (condition CostBudgetWarning). Unset, a run's
	// cost is counted but not capped.
	// +kubebuilder:validation:MaxLength=25
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,12})?$`
	// +optional
	MaxCost *string `json:"maxCost,omitempty"`

	// wrapUp names an agent that has one last turn when the next step would pass a step,
	// handoff, token, cost or time limit: with no handoffs and no tools, told which limit ran
	// out, its worst-case cost reserved ahead so the budget holds. The run then ends Succeeded,
	// reason WrappedUp, with the limit as evidence.
	// +optional
	WrapUp *WrapUp `json:"wrapUp,omitempty"`

	// maxBranches is the most branches a run may start in all its fan-outs. Defaults to 16.
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxBranches *int32 `json:"maxBranches,omitempty"`

	// maxDepth is how deep branches may nest: a run at depth maxDepth (a branch of a branch,
	// at 2) is offered no fan-out. Defaults to 2.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +optional
	MaxDepth *int32 `json:"maxDepth,omitempty"`
}

// WrapUp names the agent that ends a run with an answer when a limit runs out.
type WrapUp struct {
	// agent is the agent that wraps up: the name of an agent in spec.agents.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Agent string `json:"agent,omitempty"`
}

// LoopDetection configures the detectors that end a run going round in circles.
// +kubebuilder:validation:XValidation:rule="!has(self.window) || !has(self.minUniqueAgents) || self.minUniqueAgents <= self.window",message="must not be larger than window",fieldPath=".minUniqueAgents",reason=FieldValueInvalid
type LoopDetection struct {
	// window is how many of the latest steps' agents the window detector looks at. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=50
	// +optional
	Window *int32 `json:"window,omitempty"`

	// minUniqueAgents is the fewest distinct agents the window must hold. Defaults to 2.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinUniqueAgents *int32 `json:"minUniqueAgents,omitempty"`

	// maxCycleRepeats is how many times in a row a cycle of agents may repeat. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=25
	// +optional
	MaxCycleRepeats *int32 `json:"maxCycleRepeats,omitempty"`

	// maxRepeatedInputs is how many times one agent may be given the same input. Defaults to 2.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=50
	// +optional
	MaxRepeatedInputs *int32 `json:"maxRepeatedInputs,omitempty"`

	// maxRepeatedOutputs is how many times one agent may return the same output. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=50
	// +optional
	MaxRepeatedOutputs *int32 `json:"maxRepeatedOutputs,omitempty"`

	// maxRepeatedToolCalls is how many times a run may call the same tool with the same
	// arguments; the call past it ends the run LoopDetected (RepeatedToolCall). Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxRepeatedToolCalls *int32 `json:"maxRepeatedToolCalls,omitempty"`

	// allow lists legitimate loops, each with its own bound.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Allow []AllowedCycle `json:"allow,omitempty"`
}

// AllowedCycle is a loop of agents that may repeat up to its own bound. The loop detectors see
// the latest 50 steps, so a cycle's length times (maxRepeats + 1) must fit in 50.
// +kubebuilder:validation:XValidation:rule="size(self.cycle) * (self.maxRepeats + 1) <= 50",message="cycle length × (maxRepeats + 1) must be at most 50 steps, the history the loop detectors see",fieldPath=".maxRepeats",reason=FieldValueInvalid
type AllowedCycle struct {
	// cycle is one period of the loop, e.g. [coder, reviewer].
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +required
	Cycle []string `json:"cycle,omitempty"`

	// maxRepeats is how many times in a row the cycle may repeat.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=49
	// +required
	MaxRepeats int32 `json:"maxRepeats,omitempty"`
}

// ApprovalGate is a point where a run waits for people to approve.
// +kubebuilder:validation:XValidation:rule="has(self.after) != has(self.before)",message="exactly one of after and before must be set",reason=FieldValueInvalid
type ApprovalGate struct {
	// name identifies the gate in annotations and status.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// after opens the gate when this agent's step completes.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	After string `json:"after,omitempty"`

	// before opens the gate before the run completes. The only value is Complete.
	// +kubebuilder:validation:Enum=Complete
	// +optional
	Before string `json:"before,omitempty"`

	// required is the number of distinct approvers needed.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	Required int32 `json:"required,omitempty"`

	// timeout is how long the gate waits for a decision.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// onTimeout is the decision taken when the gate times out: Reject or Approve.
	// +kubebuilder:validation:Enum=Reject;Approve
	// +kubebuilder:default=Reject
	// +optional
	OnTimeout string `json:"onTimeout,omitempty"`

	// allowSelfApproval says whether the person who created a run may approve it at this gate.
	// Defaults to true. Set it to false for separation of duties: the run's creator, recorded
	// by the admission webhook in the annotation agents.baton.dev/created-by, may still reject,
	// revise or cancel, but the approvals must come from other people. A run whose creator was
	// not recorded (created without the webhook) cannot be approved at such a gate.
	// +optional
	AllowSelfApproval *bool `json:"allowSelfApproval,omitempty"`

	// remind sends GateReminder to the config's sinks while the gate waits.
	// +optional
	Remind *GateReminder `json:"remind,omitempty"`

	// escalate sends GateEscalated once the gate has waited this long, naming more deciders.
	// +optional
	Escalate *GateEscalation `json:"escalate,omitempty"`
}

// Routing configures the supervisor of a Supervisor-mode run.
type Routing struct {
	// supervisor is the agent that routes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Supervisor string `json:"supervisor,omitempty"`

	// minConfidence is the confidence below which a decision's fallback, else defaultAgent,
	// is used. Defaults to 0.7.
	// +kubebuilder:default=0.7
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +optional
	MinConfidence *float64 `json:"minConfidence,omitempty"`

	// defaultAgent is used when a decision is below minConfidence and has no fallback.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	DefaultAgent string `json:"defaultAgent,omitempty"`

	// maxReroutes is how many failed child steps are re-routed before the run ends
	// RoutingExhausted. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxReroutes *int32 `json:"maxReroutes,omitempty"`
}
