package v1alpha1

// NotifyFormat is how a sink is sent its events.
// +kubebuilder:validation:Enum=CloudEvents;Slack
type NotifyFormat string

const (
	// NotifyCloudEvents sends each event as a CloudEvent 1.0 in structured JSON.
	NotifyCloudEvents NotifyFormat = "CloudEvents"
	// NotifySlack sends each event as a Slack incoming webhook's message: text and blocks.
	NotifySlack NotifyFormat = "Slack"
)

// NotifyEvent is a kind of event a sink may want.
// +kubebuilder:validation:Enum=GateOpened;GateReminder;GateEscalated;GateDecided;RunEnded;BudgetWarning
type NotifyEvent string

// The events sinks are sent.
const (
	// NotifyGateOpened: a run waits at a gate.
	NotifyGateOpened NotifyEvent = "GateOpened"
	// NotifyGateReminder: a run still waits at a gate, every remind.every.
	NotifyGateReminder NotifyEvent = "GateReminder"
	// NotifyGateEscalated: a run has waited at a gate for escalate.after.
	NotifyGateEscalated NotifyEvent = "GateEscalated"
	// NotifyGateDecided: a gate was decided, or timed out.
	NotifyGateDecided NotifyEvent = "GateDecided"
	// NotifyRunEnded: a run ended.
	NotifyRunEnded NotifyEvent = "RunEnded"
	// NotifyBudgetWarning: a run used the share of its token or cost budget that warns.
	NotifyBudgetWarning NotifyEvent = "BudgetWarning"
)

// NotifyEvents are every event, in the order they are documented.
var NotifyEvents = []NotifyEvent{NotifyGateOpened, NotifyGateReminder, NotifyGateEscalated, NotifyGateDecided, NotifyRunEnded, NotifyBudgetWarning}

// NotifySink is where a config's runs' events are sent: a URL, or a URL read from a Secret.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.urlFrom)",message="set exactly one of url and urlFrom"
type NotifySink struct {
	// name identifies the sink in the config's status and in metrics.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// url is where events are posted: https, or http to an address the egress policy allows.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	URL string `json:"url,omitempty"`

	// urlFrom reads the URL from a key of a Secret in the config's namespace, labelled
	// agents.baton.dev/api-key=true as for API keys: a Slack webhook URL is itself a secret.
	// +optional
	URLFrom *SecretKeyRef `json:"urlFrom,omitempty"`

	// format is CloudEvents (structured JSON, 1.0) or Slack (an incoming webhook's JSON).
	// +kubebuilder:default=CloudEvents
	// +optional
	Format NotifyFormat `json:"format,omitempty"`

	// secretRef names, when set, the key each request is signed with: the header
	// Baton-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">. The Secret is
	// labelled as for API keys.
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`

	// events are the events the sink is sent; every event when empty.
	// +listType=set
	// +kubebuilder:validation:MaxItems=6
	// +optional
	Events []NotifyEvent `json:"events,omitempty"`
}

// Wants says whether the sink is sent events of kind e.
func (s *NotifySink) Wants(e NotifyEvent) bool {
	if len(s.Events) == 0 {
		return true
	}
	for _, w := range s.Events {
		if w == e {
			return true
		}
	}
	return false
}

// GateReminder reminds a gate's sinks while it waits.
type GateReminder struct {
	// every is how long after the gate opened, and after each reminder, the next is sent.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="must be at least 1m"
	// +required
	Every Duration `json:"every,omitempty"`
}

// GateEscalation names who else is told when a gate has waited long.
type GateEscalation struct {
	// after is how long after the gate opened it escalates.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +required
	After Duration `json:"after,omitempty"`

	// to are the users and groups the escalation names as deciders. Deciding still needs the
	// approve verb.
	// +optional
	To Deciders `json:"to,omitzero"`
}

// Deciders are people named to decide at a gate.
// +kubebuilder:validation:XValidation:rule="(has(self.users) ? size(self.users) : 0) + (has(self.groups) ? size(self.groups) : 0) > 0",message="name at least one user or group"
type Deciders struct {
	// users are user names, as the API server knows them.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Users []string `json:"users,omitempty"`

	// groups are group names.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// SinkStatus is what a config's sink was sent: the counts are of the last 48 hours, as the
// outbox keeps them.
type SinkStatus struct {
	// name is the sink's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name,omitempty"`

	// sent counts the events the sink took.
	// +optional
	Sent int64 `json:"sent,omitempty"`

	// retrying counts the events waiting to be sent again.
	// +optional
	Retrying int64 `json:"retrying,omitempty"`

	// givenUp counts the events the sink never took.
	// +optional
	GivenUp int64 `json:"givenUp,omitempty"`

	// lastError says why the last event that failed did.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// ConditionNotifying is an AgentConfig's condition on its sinks: True while they take their
// events, False (reason SinkFailing) while one of them fails, naming it.
const ConditionNotifying = "Notifying"
