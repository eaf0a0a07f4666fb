package v1alpha1

// GuardrailStage is where in a step a guardrail is asked.
// +kubebuilder:validation:Enum=ToolResult;ModelInput;Output
type GuardrailStage string

const (
	// StageToolResult is every tool call's result, before the model and the transcript see it.
	StageToolResult GuardrailStage = "ToolResult"
	// StageModelInput is each step's input, before the model sees it.
	StageModelInput GuardrailStage = "ModelInput"
	// StageOutput is every step's output, before the transcript, the status and the next agent
	// see it.
	StageOutput GuardrailStage = "Output"
)

// GuardrailFailure is what a guardrail that cannot answer comes to.
// +kubebuilder:validation:Enum=Closed;Open
type GuardrailFailure string

const (
	// FailClosed blocks what the guardrail could not judge.
	FailClosed GuardrailFailure = "Closed"
	// FailOpen lets it through, and the transcript says the guardrail did not answer.
	FailOpen GuardrailFailure = "Open"
)

// Guardrail is a screening service (PII redaction, a prompt-injection classifier) asked at the
// stages named. It is sent POST {stage, namespace, run, agent, step, text} and answers
// {"action": "allow" | "block" | "redact" | "gate", "reason": "...", "text": "..."}.
type Guardrail struct {
	// name identifies the guardrail in the transcript and in metrics. A DNS-1123 label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// url is where the guardrail takes its checks, through the egress policy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')",message="must be an absolute http or https URL"
	// +required
	URL string `json:"url,omitempty"`

	// headersFrom names a Secret in the run's namespace whose keys become request headers. The
	// Secret must carry the label agents.baton.dev/api-key=true.
	// +optional
	HeadersFrom *SecretRef `json:"headersFrom,omitempty"`

	// timeout bounds one check, its retries included. Defaults to 5s.
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('60s')",message="must be more than 0s and at most 60s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// stages are where the guardrail is asked.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +required
	Stages []GuardrailStage `json:"stages,omitempty"`

	// failure is what a check the guardrail cannot answer comes to: Closed (the default) blocks,
	// Open lets the text through.
	// +kubebuilder:default=Closed
	// +optional
	Failure GuardrailFailure `json:"failure,omitempty"`
}

// GuardGatePrefix starts the name of the gate a guardrail's `gate` answer opens:
// guard/<guardrail>.
const GuardGatePrefix = "guard/"

// GuardGateName is the gate the guardrail's `gate` answer opens.
func GuardGateName(guardrail string) string { return GuardGatePrefix + guardrail }

// PendingGuard is a text a guardrail asked a person to review before the run goes on with it:
// a tool's result, a step's input or a step's output. Approved, the run goes on with the text;
// rejected, the text is blocked as the guardrail's block would.
type PendingGuard struct {
	// guardrail is the guardrail that asked for the review.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:MinLength=1
	// +required
	Guardrail string `json:"guardrail,omitempty"`

	// stage is where the text was screened.
	// +required
	Stage GuardrailStage `json:"stage,omitempty"`

	// step is the step the text belongs to.
	// +kubebuilder:validation:Minimum=1
	// +required
	Step int32 `json:"step,omitempty"`

	// call is where in the step the text came: the tool call whose result it is, 0 for the
	// step's input, one past the step's last call for its output. Decisions at the gate are
	// recorded with it (status.approvals[].toolCall).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Call int32 `json:"call,omitempty"`

	// reason is what the guardrail said.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`

	// text is the text that waits, as the guardrails before this one left it. Bounded; in full
	// in the transcript.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Text string `json:"text,omitempty"`
}
