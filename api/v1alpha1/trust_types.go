package v1alpha1

// Trust says whether what a source gives a run may carry instructions from outside.
// +kubebuilder:validation:Enum=Trusted;Untrusted
type Trust string

const (
	// Trusted sources say only what the team's owners stand behind.
	Trusted Trust = "Trusted"
	// Untrusted sources may carry instructions written by anyone (web pages, mail, tickets,
	// other teams' agents): a run that read them is tainted.
	Untrusted Trust = "Untrusted"
)

// SideEffectPolicy is what a tainted run's call of a tool with side effects meets.
// +kubebuilder:validation:Enum=Gate;Refuse
type SideEffectPolicy string

const (
	// SideEffectGate holds the call at the gate taint/<server>/<tool> for people to decide.
	SideEffectGate SideEffectPolicy = "Gate"
	// SideEffectRefuse refuses the call: the model is told why.
	SideEffectRefuse SideEffectPolicy = "Refuse"
)

// UntrustedSpec says what of a run's input is untrusted, and what a tainted run's side
// effects meet.
type UntrustedSpec struct {
	// input Untrusted makes every run's input untrusted (an A2A caller's, for instance): the run
	// is tainted from its start.
	// +kubebuilder:default=Trusted
	// +optional
	Input Trust `json:"input,omitempty"`

	// onSideEffect is what a tainted call of a tool with sideEffects meets: Gate (a person
	// decides at taint/<server>/<tool>) or Refuse (the model is told it was refused).
	// +kubebuilder:default=Gate
	// +optional
	OnSideEffect SideEffectPolicy `json:"onSideEffect,omitempty"`
}

// Taint says where untrusted content first came into a run's context.
type Taint struct {
	// source is where it came from: input, tool <server>/<tool>, agent <name>, branch <run>,
	// or turn <run> of the session.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Source string `json:"source,omitempty"`

	// step is the step of the run it came in at; 0 for the run's input or what the run
	// inherited (its parent's, its session's, or the run it started from).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Step int32 `json:"step,omitempty"`
}

// TaintGatePrefix starts the name of the gate a tainted call of a tool with side effects waits
// at: taint/<server>/<tool>.
const TaintGatePrefix = "taint/"

// TaintGateName is the gate a tainted call of the tool waits at.
func TaintGateName(server, tool string) string { return TaintGatePrefix + server + "/" + tool }
