package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkflowMode says who decides which agent acts next.
// +kubebuilder:validation:Enum=Swarm;Supervisor;StateMachine
type WorkflowMode string

const (
	// ModeSwarm lets each agent hand off to the agents it names in its handoffs.
	ModeSwarm WorkflowMode = "Swarm"
	// ModeSupervisor lets one routing agent pick every next agent.
	ModeSupervisor WorkflowMode = "Supervisor"
	// ModeStateMachine routes on signals through the config's states alone.
	ModeStateMachine WorkflowMode = "StateMachine"
)

// ModelProvider names the implementation that runs an agent's steps.
// +kubebuilder:validation:Enum=Scripted;OpenAI;HTTP;A2A
type ModelProvider string

const (
	// ProviderScripted plays the agent's script: deterministic, offline.
	ProviderScripted ModelProvider = "Scripted"
	// ProviderOpenAI calls an OpenAI-compatible chat completions endpoint.
	ProviderOpenAI ModelProvider = "OpenAI"
	// ProviderHTTP posts each step to an agent served over HTTP.
	ProviderHTTP ModelProvider = "HTTP"
	// ProviderA2A sends each step as a message to an agent that speaks the Agent2Agent protocol
	// (A2A), at the base URL its AgentCard is served from.
	ProviderA2A ModelProvider = "A2A"
)

// SignalAction is what a signal does to the run.
// +kubebuilder:validation:Enum=Terminate;Complete;AwaitInput;None
type SignalAction string

const (
	// ActionTerminate ends the run Terminated when a terminator emits it; it is ignored otherwise.
	ActionTerminate SignalAction = "Terminate"
	// ActionComplete ends the run Completed.
	ActionComplete SignalAction = "Complete"
	// ActionAwaitInput pauses the run until a person replies.
	ActionAwaitInput SignalAction = "AwaitInput"
	// ActionNone only records the signal; StateMachine transitions use it.
	ActionNone SignalAction = "None"
)

// FinishReason says why a model stopped producing output.
// +kubebuilder:validation:Enum=stop;length
type FinishReason string

const (
	// FinishStop is a complete answer.
	FinishStop FinishReason = "stop"
	// FinishLength is an answer cut at the output-token limit.
	FinishLength FinishReason = "length"
)

// AgentConfig describes a team of agents, the workflow that connects them and the limits every
// run of the team is held to. Runs pin the config as it is when they start.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ac;agentconfig,categories=baton
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Agents",type=integer,JSONPath=`.status.agents`
// +kubebuilder:printcolumn:name="Entrypoint",type=string,JSONPath=`.spec.entrypoint`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the team, its workflow and its limits.
	// +required
	Spec AgentConfigSpec `json:"spec,omitzero"`

	// status says whether runs can use the config.
	// +optional
	Status AgentConfigStatus `json:"status,omitempty,omitzero"`
}

// AgentConfigStatus says whether runs can use the config.
type AgentConfigStatus struct {
	// agents is the number of agents in the team.
	// +optional
	Agents int32 `json:"agents,omitempty"`

	// observedGeneration is the spec generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// notifications counts what each sink of spec.notify was sent.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Notifications []SinkStatus `json:"notifications,omitempty"`

	// conditions are Ready, Stalled and Notifying. Ready is True when runs can start with the
	// config, and False with the reason (ConfigInvalid) and the fields at fault otherwise;
	// Stalled is True, with the same reason and message, while Ready is False, and absent
	// otherwise. Notifying, for a config with spec.notify, is False (SinkFailing) while one of
	// its sinks fails.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionReady is a condition of both kinds. On an AgentConfig it says whether runs can start
// with it: True, reason Valid; False, reason ConfigInvalid, beside Stalled=True, which kstatus
// reads as Failed. On an AgentRun it is True once the run ended Succeeded, with the termination
// reason; False before (reason: its phase) and when it ended otherwise (reason: the termination
// reason), so kubectl wait --for=condition=Ready waits for success.
const ConditionReady = "Ready"

// ReasonValid is the Ready reason of a config runs can use.
const ReasonValid = "Valid"

// AgentConfigList is a list of AgentConfigs.
// +kubebuilder:object:root=true
type AgentConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentConfig `json:"items"`
}

// AgentConfigSpec is the team, its workflow and its limits.
// +kubebuilder:validation:XValidation:rule="self.agents.exists(a, a.name == self.entrypoint)",messageExpression="self.entrypoint + ' is not the name of an agent in spec.agents'",fieldPath=".entrypoint",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.agents.all(a, !has(a.handoffs) || a.handoffs.all(h, self.agents.exists(b, b.name == h)))",message="agents[].handoffs: every handoff target must be the name of an agent in spec.agents",fieldPath=".agents",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.mode == 'StateMachine' ? has(self.states) && size(self.states) > 0 : !has(self.states) || size(self.states) == 0",message="required in StateMachine mode and only allowed in it",fieldPath=".states",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.states) || self.states.all(s, !has(s.agent) || self.agents.exists(a, a.name == s.agent))",message="states[].agent: every state's agent must be the name of an agent in spec.agents",fieldPath=".states",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.states) || self.states.all(s, (!has(s.transitions) || s.transitions.all(k, self.states.exists(t, t.name == s.transitions[k]))) && (!has(s.onError) || self.states.exists(t, t.name == s.onError)))",message="states[].transitions: every transition (transitions and onError) must lead to a state in spec.states",fieldPath=".states",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.states) || self.states.all(s, !has(s.transitions) || s.transitions.all(k, has(self.signals) && self.signals.exists(g, g.name == k)))",message="states[].transitions: every transition must be keyed by a signal declared in spec.signals",fieldPath=".states",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !has(self.limits.wrapUp) || self.agents.exists(a, a.name == self.limits.wrapUp.agent)",messageExpression="self.limits.wrapUp.agent + ' is not the name of an agent in spec.agents'",fieldPath=".limits.wrapUp.agent",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.mode != 'Supervisor' || has(self.routing)",message="required in Supervisor mode",fieldPath=".routing",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.routing) || self.agents.exists(a, a.name == self.routing.supervisor)",messageExpression="self.routing.supervisor + ' is not the name of an agent in spec.agents'",fieldPath=".routing.supervisor",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.routing) || !has(self.routing.defaultAgent) || self.agents.exists(a, a.name == self.routing.defaultAgent)",messageExpression="self.routing.defaultAgent + ' is not the name of an agent in spec.agents'",fieldPath=".routing.defaultAgent",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.approvals) || self.approvals.all(g, !has(g.after) || self.agents.exists(a, a.name == g.after))",message="approvals[].after: must be the name of an agent in spec.agents",fieldPath=".approvals",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.loopDetection) || !has(self.loopDetection.allow) || self.loopDetection.allow.all(c, c.cycle.all(n, self.agents.exists(a, a.name == n)))",message="allow[].cycle: every entry must be the name of an agent",fieldPath=".loopDetection.allow",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="self.agents.all(a, !has(a.tools) || a.tools.all(t, has(self.toolServers) && self.toolServers.exists(s, s.name == t.server)))",message="agents[].tools[].server: every tool server must be the name of an entry in spec.toolServers",fieldPath=".agents",reason=FieldValueInvalid
type AgentConfigSpec struct {
	// mode says who decides which agent acts next: Swarm (each agent hands off), Supervisor
	// (spec.routing.supervisor routes) or StateMachine (spec.states route on signals).
	// +kubebuilder:default=Swarm
	// +optional
	Mode WorkflowMode `json:"mode,omitempty"`

	// entrypoint is the agent that takes the first step, and in Swarm mode the agent that
	// control returns to. It must name one of spec.agents.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Entrypoint string `json:"entrypoint,omitempty"`

	// agents is the team. Names are unique.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +required
	Agents []Agent `json:"agents,omitempty"`

	// signals are the named markers agents may emit, and what each does to the run. Only
	// declared signals count.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Signals []Signal `json:"signals,omitempty"`

	// states route a StateMachine run on signals. The run starts in the first state.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	States []State `json:"states,omitempty"`

	// limits bound every run of this config. An AgentRun may override them.
	// +kubebuilder:default={}
	// +optional
	Limits Limits `json:"limits,omitempty,omitzero"`

	// loopDetection configures the detectors that end a run that goes round in circles.
	// +kubebuilder:default={}
	// +optional
	LoopDetection LoopDetection `json:"loopDetection,omitempty,omitzero"`

	// approvals are the human gates a run waits at.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Approvals []ApprovalGate `json:"approvals,omitempty"`

	// notify are where the runs' gates, ends and budget warnings are sent
	// (docs/notifications.md).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Notify []NotifySink `json:"notify,omitempty"`

	// untrusted says what of a run's input is untrusted, and what a tainted run's calls of
	// tools with side effects meet (docs/security.md, "Untrusted content").
	// +optional
	Untrusted *UntrustedSpec `json:"untrusted,omitempty"`

	// guardrails are screening services asked, through the egress policy, at the stages each
	// names: tool results, step inputs, step outputs (docs/security.md, "Guardrails").
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Guardrails []Guardrail `json:"guardrails,omitempty"`

	// routing configures the supervisor in Supervisor mode.
	// +optional
	Routing *Routing `json:"routing,omitempty"`

	// toolServers are the MCP servers and HTTP tools the agents may call inside their steps.
	// Names are unique.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	ToolServers []ToolServer `json:"toolServers,omitempty"`

	// context is the budget of what each agent sees of the run's earlier steps (outputs,
	// failures, people's feedback and replies), built from the run's transcript with full texts.
	// +kubebuilder:default={}
	// +optional
	Context ContextBudget `json:"context,omitempty,omitzero"`

	// ttlSecondsAfterFinished is the default of the runs' own: a finished run, and its
	// transcript, is deleted this long after it ended. Unset, runs are kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// a2a serves the team as an Agent2Agent (A2A) agent from the operator (docs/a2a.md).
	// +optional
	A2A *A2AServing `json:"a2a,omitempty"`
}

// ContextBudget bounds what an agent sees of the run's earlier steps. The newest entries are
// kept: at most maxMessages of them, and no more than maxChars characters in all.
type ContextBudget struct {
	// maxMessages is the most earlier entries an agent sees. Defaults to 12.
	// +kubebuilder:default=12
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	// +optional
	MaxMessages *int32 `json:"maxMessages,omitempty"`

	// maxChars is the most characters of earlier entries an agent sees. Defaults to 32000.
	// +kubebuilder:default=32000
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2000000
	// +optional
	MaxChars *int32 `json:"maxChars,omitempty"`
}

// Agent is one member of the team.
// +kubebuilder:validation:XValidation:rule="!has(self.script) || size(self.script) == 0 || !has(self.model) || ((!has(self.model.provider) || self.model.provider == 'Scripted') && !has(self.model.endpointRef))",message="only allowed when model.provider is Scripted and model.endpointRef is not set",fieldPath=".script",reason=FieldValueForbidden
type Agent struct {
	// name identifies the agent in handoffs, states and status. A DNS-1123 label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// description tells routing models and other agents what this agent is for.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// instructions is the agent's system prompt.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Instructions string `json:"instructions,omitempty"`

	// model says what runs the agent's steps.
	// +kubebuilder:default={}
	// +optional
	Model ModelSpec `json:"model,omitempty,omitzero"`

	// script is the Scripted provider's deterministic turns, consumed in order with the last
	// one repeating. Only for model.provider Scripted.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Script []ScriptTurn `json:"script,omitempty"` //nolint:kubeapilinter // arrayofstruct: a turn may be only an output, a handoff, a signal or an error; no field of it is always needed

	// handoffs are the only agents this one may hand off to (Swarm mode).
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Handoffs []string `json:"handoffs,omitempty"`

	// terminator lets this agent's Terminate signal end the run, and makes its plain answers
	// final.
	// +optional
	Terminator bool `json:"terminator,omitempty"`

	// maxSteps caps the steps this agent may take in one run.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxSteps *int32 `json:"maxSteps,omitempty"`

	// timeout is the deadline of each of this agent's steps. Defaults to limits.agentTimeout.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// parallel lets this agent hand off to several of its handoffs at once, each branch a
	// child AgentRun, and says how the branches join.
	// +optional
	Parallel *Parallel `json:"parallel,omitempty"`

	// tools are the tool servers this agent may call inside its steps, and how.
	// +listType=map
	// +listMapKey=server
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Tools []AgentTools `json:"tools,omitempty"`

	// maxToolCalls is the most tool calls in one step of this agent. Then the model is asked
	// for its answer without tools. Defaults to 10.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxToolCalls *int32 `json:"maxToolCalls,omitempty"`

	// outputSchema is a JSON Schema the agent's final output must satisfy. Only references
	// inside the schema itself ("$ref": "#/$defs/...") resolve: Baton never reads a file or
	// fetches a URL for a schema. At most 64 KiB, nested at most 32 levels deep.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	OutputSchema *apiextensionsv1.JSON `json:"outputSchema,omitempty"`
}

// ModelSpec says what runs an agent's steps.
// +kubebuilder:validation:XValidation:rule="!has(self.trust) || self.trust != 'Untrusted' || (has(self.provider) && self.provider in ['HTTP', 'A2A'])",message="Untrusted applies to HTTP and A2A agents, whose answers come from outside; mark a tool server Untrusted for what a model reads",fieldPath=".trust"
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'HTTP' || has(self.endpointRef) || (has(self.endpoint) && size(self.endpoint) > 0)",message="required when provider is HTTP, unless endpointRef is set",fieldPath=".endpoint",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'A2A' || (!has(self.endpointRef) && has(self.endpoint) && size(self.endpoint) > 0)",message="required when provider is A2A: the base URL the agent serves its AgentCard under (endpointRef is not for A2A agents)",fieldPath=".endpoint",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.endpointRef) || ((!has(self.endpoint) || size(self.endpoint) == 0) && !has(self.apiKeySecretRef))",message="endpoint and apiKeySecretRef come from endpointRef: leave them out",fieldPath=".endpointRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'OpenAI' || (has(self.name) && size(self.name) > 0)",message="required when provider is OpenAI",fieldPath=".name",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.endpointRef) || (has(self.name) && size(self.name) > 0)",message="required with endpointRef: the model to call, and to price",fieldPath=".name",reason=FieldValueRequired
type ModelSpec struct {
	// provider is the implementation: Scripted (deterministic turns, offline), OpenAI (any
	// OpenAI-compatible server), HTTP (an agent behind an HTTP endpoint) or A2A (an agent that
	// speaks the Agent2Agent protocol).
	// +kubebuilder:default=Scripted
	// +optional
	Provider ModelProvider `json:"provider,omitempty"`

	// name is the model name, for OpenAI.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Name string `json:"name,omitempty"`

	// endpointRef names a ModelEndpoint or ClusterModelEndpoint the agent's steps use: its URL,
	// key, shared limits and prices. With it, the provider, URL and key are the endpoint's:
	// provider may be left at its default or must match.
	// +optional
	EndpointRef *EndpointReference `json:"endpointRef,omitempty"`

	// endpoint is the base URL of an OpenAI-compatible server, the HTTP agent's URL, or the
	// base URL an A2A agent serves its AgentCard under (/.well-known/agent-card.json). An
	// endpoint given here is not paced with other runs and its steps cost nothing: name a
	// ModelEndpoint in endpointRef for that.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == '' || isURL(self)",message="must be an absolute URL"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// apiKeySecretRef names the key of a Secret in the run's namespace that holds the API key.
	// +optional
	APIKeySecretRef *SecretKeyRef `json:"apiKeySecretRef,omitempty"`

	// maxOutputTokens caps the tokens of one answer.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxOutputTokens *int32 `json:"maxOutputTokens,omitempty"`

	// temperature is the sampling temperature.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	// +optional
	Temperature *float64 `json:"temperature,omitempty"`

	// trust Untrusted, for an HTTP or A2A agent, says its answers may carry instructions from
	// outside (another team's agent, for instance): a run it answers is tainted.
	// +kubebuilder:default=Trusted
	// +optional
	Trust Trust `json:"trust,omitempty"`
}

// SecretKeyRef names one key of a Secret in the same namespace.
type SecretKeyRef struct {
	// name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`

	// key is the key within the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Key string `json:"key,omitempty"`
}
