package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Tools: the servers whose tools agents call inside their steps, and what each agent may call.

// ToolServer is a server whose tools agents may call: an MCP server, or one HTTP endpoint that
// is one tool.
// +kubebuilder:validation:XValidation:rule="has(self.mcp) != has(self.http)",message="exactly one of mcp and http must be set",reason=FieldValueInvalid
type ToolServer struct {
	// name identifies the server in agents' tools and in approval gates. A DNS-1123 label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// mcp is a Model Context Protocol server reached over streamable HTTP. The operator never
	// starts a process for a tool: the server runs on its own.
	// +optional
	MCP *MCPServer `json:"mcp,omitempty"`

	// http is one tool served over HTTP: each call POSTs the arguments as JSON and takes the
	// JSON response as the result.
	// +optional
	HTTP *HTTPTool `json:"http,omitempty"`

	// trust Untrusted says the server's results may carry instructions from outside (web
	// pages, mail, tickets): a run that reads one is tainted, and its calls of tools with side
	// effects meet spec.untrusted.onSideEffect.
	// +kubebuilder:default=Trusted
	// +optional
	Trust Trust `json:"trust,omitempty"`
}

// MCPServer is an MCP server reached over streamable HTTP.
type MCPServer struct {
	// url is the server's MCP endpoint, e.g. http://memory-mcp.tools.svc:8080/mcp.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')",message="must be an absolute http or https URL"
	// +required
	URL string `json:"url,omitempty"`

	// headersFrom names a Secret in the run's namespace whose keys become request headers
	// (Authorization, for instance). Its values are never logged or written to status. The
	// Secret must carry the label agents.baton.dev/api-key=true: the operator reads no other.
	// +optional
	HeadersFrom *SecretRef `json:"headersFrom,omitempty"`

	// timeout bounds one tool call, inside the step's own deadline. Defaults to 30s.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
}

// HTTPTool is one tool served over HTTP.
type HTTPTool struct {
	// url is where calls are POSTed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')",message="must be an absolute http or https URL"
	// +required
	URL string `json:"url,omitempty"`

	// tool is the tool's name, as models see it and in its approval gate
	// (tool/<server>/<tool>). Defaults to the server's name.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]*$`
	// +optional
	Tool string `json:"tool,omitempty"`

	// description tells models what the tool does and when to call it.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// inputSchema is the JSON Schema of the arguments, offered to the model. Defaults to any
	// object. The same rules as outputSchema's apply: no file or URL is ever read for it.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	InputSchema *apiextensionsv1.JSON `json:"inputSchema,omitempty"`

	// outputSchema is a JSON Schema the result must satisfy; a result that does not goes back
	// to the model as an error.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	OutputSchema *apiextensionsv1.JSON `json:"outputSchema,omitempty"`

	// headersFrom names a Secret in the run's namespace whose keys become request headers, as
	// for MCP servers.
	// +optional
	HeadersFrom *SecretRef `json:"headersFrom,omitempty"`

	// timeout bounds one call, inside the step's own deadline. Defaults to 30s.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
}

// SecretRef names a Secret in the same namespace.
type SecretRef struct {
	// name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
}

// ToolApproval says whether a tool's calls wait for a person.
// +kubebuilder:validation:Enum=Required;None
type ToolApproval string

const (
	// ToolApprovalRequired makes every call wait at the gate tool/<server>/<tool>.
	ToolApprovalRequired ToolApproval = "Required"
	// ToolApprovalNone makes calls at once.
	ToolApprovalNone ToolApproval = "None"
)

// AgentTools is the tools of one server that an agent may call, and how.
type AgentTools struct {
	// server names one of spec.toolServers.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Server string `json:"server,omitempty"`

	// allow names the only tools of the server the agent may call; unset, it may call all.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	Allow []string `json:"allow,omitempty"`

	// approval Required makes every call of these tools wait for people at the gate
	// tool/<server>/<tool>, with the call's arguments in status.pendingApproval.
	// +kubebuilder:default=None
	// +optional
	Approval ToolApproval `json:"approval,omitempty"`

	// gate is the quorum and timeout of the approval gate. Defaults: one approver, no timeout.
	// +optional
	Gate *ToolGate `json:"gate,omitempty"`

	// sideEffects marks tools whose calls change the world: a call that succeeded is never
	// made again, even after the operator restarts mid-step, and one cut short by a restart is
	// not made again either (the model is told its outcome is unknown).
	// +optional
	SideEffects bool `json:"sideEffects,omitempty"`
}

// ToolGate is the quorum and timeout of a tool's approval gate.
type ToolGate struct {
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

	// onTimeout is the decision taken when the gate times out: Reject (the run ends
	// ApprovalExpired) or Approve (the call is made).
	// +kubebuilder:validation:Enum=Reject;Approve
	// +kubebuilder:default=Reject
	// +optional
	OnTimeout string `json:"onTimeout,omitempty"`

	// remind sends GateReminder to the config's sinks while a call waits at the tool's gate, or
	// at its taint gate.
	// +optional
	Remind *GateReminder `json:"remind,omitempty"`

	// escalate sends GateEscalated once a call has waited this long at the tool's gate, or at
	// its taint gate, naming more deciders.
	// +optional
	Escalate *GateEscalation `json:"escalate,omitempty"`
}

// ScriptToolCall is a tool call a Scripted agent makes, for real, against the named server.
type ScriptToolCall struct {
	// server names one of the agent's tool servers.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Server string `json:"server,omitempty"`

	// tool is the tool's name on the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Tool string `json:"tool,omitempty"`

	// arguments are the call's arguments, a JSON object.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Arguments *apiextensionsv1.JSON `json:"arguments,omitempty"`
}

// ToolGatePrefix starts the name of every tool's approval gate: tool/<server>/<tool>.
const ToolGatePrefix = "tool/"

// ToolGateName is the approval gate of a tool.
func ToolGateName(server, tool string) string { return ToolGatePrefix + server + "/" + tool }
