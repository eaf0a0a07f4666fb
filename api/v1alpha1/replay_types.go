package v1alpha1

// A run that replays another: the recorded run goes through the workflow core again on the
// config as it is now, each agent answered with its recorded turns; no agent or tool is called
// (docs/replay.md).

// RunReplay names the recorded run a run replays.
type RunReplay struct {
	// run is a run of the namespace that started, whose transcript is replayed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Run string `json:"run,omitempty"`
}

// ReplayStatus is what a replay found.
type ReplayStatus struct {
	// run is the run replayed.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Run string `json:"run,omitempty"`

	// diverged is the place, from 1, in the handoff sequences where the replayed path first
	// differs from the recorded one; 0 when they are the same.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Diverged int32 `json:"diverged,omitempty"`

	// stopped says why the replay stopped before the replayed run ended, if it did: the run
	// asked for something the recording does not hold.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Stopped string `json:"stopped,omitempty"`

	// recorded is how the recorded run ended.
	// +optional
	Recorded ReplayOutcome `json:"recorded,omitempty,omitzero"`

	// replayed is how the replayed run ended, or where the replay stopped. Its handoff
	// sequence is this run's status.handoffSequence.
	// +optional
	Replayed ReplayOutcome `json:"replayed,omitempty,omitzero"`

	// attempts counts the replays of the recorded run this run began: written before each
	// begins to read, so that one the operator stopped during (a restart, a crash) is known
	// after it. A replay is begun at most MaxReplayAttempts times.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// MaxReplayAttempts is how many times a replay run begins its replay: a replay reads and calls
// nothing, so one the operator stopped during is begun again, but not for ever, since a replay
// that took the operator down would take it down each time (docs/design/replay.md).
const MaxReplayAttempts = 3

// ReplayOutcome is how a run ended, as a replay compares it.
type ReplayOutcome struct {
	// phase is the run's phase at its end, or where the replay stopped.
	// +optional
	Phase RunPhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: the phase of the run compared, as its own status has it

	// reason is the run's termination reason.
	// +optional
	Reason TerminationReason `json:"reason,omitempty"`

	// message is the run's termination message.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// steps is the steps the run took.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Steps int32 `json:"steps,omitempty"`

	// tokens is the tokens the run used.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Tokens int64 `json:"tokens,omitempty"`

	// cost is what it spent, as a decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Cost string `json:"cost,omitempty"`
}
