package v1alpha1

// Parallel branches: an agent that hands off to several agents at once, each branch a child
// AgentRun of its own, and the join of their outputs (docs/design/parallel-branches.md).

// LabelParent on a branch's AgentRun names the run it is a branch of, so that
// `kubectl get agentruns -l agents.baton.dev/parent=NAME` lists a run's branches.
const LabelParent = "agents.baton.dev/parent"

// MaxDepth bounds limits.maxDepth: how deep branches may nest.
const MaxDepth = 8

// MaxBranchesPerFanOut bounds parallel.maxBranches: the branches of one fan-out, and so the
// entries of status.branches.
const MaxBranchesPerFanOut = 16

// Parallel lets an agent hand off to several agents at once, and says how they join.
type Parallel struct {
	// maxBranches is the most branches one fan-out of this agent may start. Defaults to 4.
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	MaxBranches *int32 `json:"maxBranches,omitempty"`

	// budget says how the run's remaining limits go to the branches: Split (the default)
	// divides the remaining steps, handoffs, tokens, tool calls and cost between them; Shared
	// lets each use all of it, and ends the run for the limit once their sum reaches it.
	// +kubebuilder:default=Split
	// +optional
	Budget BranchBudget `json:"budget,omitempty"`

	// join says when the branches join, and who takes their outputs.
	// +kubebuilder:default={}
	// +optional
	Join Join `json:"join,omitempty,omitzero"`
}

// BranchBudget says how a fan-out's branches share the run's remaining limits.
// +kubebuilder:validation:Enum=Split;Shared
type BranchBudget string

const (
	// BudgetSplit divides the remaining limits between the branches, rounding down.
	BudgetSplit BranchBudget = "Split"
	// BudgetShared lets every branch use all that remains; their sum is held to it.
	BudgetShared BranchBudget = "Shared"
)

// Join says when a fan-out's branches join.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Quorum' || (has(self.quorum) && self.quorum > 0)",message="required, and more than 0, when mode is Quorum",fieldPath=".quorum",reason=FieldValueRequired
type Join struct {
	// mode is All (every branch succeeded), Quorum (quorum branches succeeded) or First (one
	// branch succeeded). Defaults to All.
	// +kubebuilder:default=All
	// +optional
	Mode JoinMode `json:"mode,omitempty"`

	// quorum is how many branches must succeed, for mode Quorum.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	// +optional
	Quorum int32 `json:"quorum,omitempty"`

	// onFailure is Fail (the default: a failed branch fails the run, reason BranchFailed) or
	// Continue (a failed branch is passed on to the join with its outcome, and the join is
	// made once every branch has ended if not before).
	// +kubebuilder:default=Fail
	// +optional
	OnFailure JoinFailurePolicy `json:"onFailure,omitempty"`

	// timeout bounds the wait for the join, from the fan-out. Past it the branches still
	// running are cancelled, and the run fails (onFailure Fail) or joins what ended
	// (Continue). Without one, the run's own timeout bounds it.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// agent takes the branches' outputs as its next input. Defaults to the agent that fanned
	// out.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Agent string `json:"agent,omitempty"`
}

// JoinMode says how many branches must succeed for a join.
// +kubebuilder:validation:Enum=All;Quorum;First
type JoinMode string

const (
	// JoinAll joins once every branch succeeded.
	JoinAll JoinMode = "All"
	// JoinQuorum joins once join.quorum branches succeeded.
	JoinQuorum JoinMode = "Quorum"
	// JoinFirst joins once one branch succeeded.
	JoinFirst JoinMode = "First"
)

// JoinFailurePolicy says what a failed branch does to its run.
// +kubebuilder:validation:Enum=Fail;Continue
type JoinFailurePolicy string

const (
	// JoinFail ends the run Failed, reason BranchFailed, when a branch fails.
	JoinFail JoinFailurePolicy = "Fail"
	// JoinContinue passes a failed branch on to the join with its outcome.
	JoinContinue JoinFailurePolicy = "Continue"
)

// BranchRequest is one branch of a Scripted agent's fan-out: the agent that takes it, and its
// input.
type BranchRequest struct {
	// agent takes the branch's first step: one of the fanning agent's handoffs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Agent string `json:"agent,omitempty"`

	// input is what the branch's agent is given.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Input string `json:"input,omitempty"`
}

// RunBranch makes an AgentRun a branch of another: the operator creates it so, and runs it
// only while its parent's status lists it (a run a user writes this on is refused).
type RunBranch struct {
	// parent is the run this one is a branch of, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Parent string `json:"parent,omitempty"`

	// step is the parent's step that fanned out.
	// +kubebuilder:validation:Minimum=1
	// +required
	Step int32 `json:"step,omitempty"`

	// index is the branch's place in the fan-out, from 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +required
	Index int32 `json:"index,omitempty"`

	// agent takes the branch's first step.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Agent string `json:"agent,omitempty"`

	// depth is how deep the branch is nested: 1 for a branch of a run that is no branch.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	// +required
	Depth int32 `json:"depth,omitempty"`
}

// BranchStatus is what a run's status says of one branch of its current fan-out.
type BranchStatus struct {
	// name is the branch's AgentRun.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`

	// uid is the UID of the branch's AgentRun, once the operator made it: the join, a cancel,
	// the console and kubectl baton take only the run of this UID as the branch.
	// +kubebuilder:validation:MaxLength=36
	// +optional
	UID string `json:"uid,omitempty"`

	// agent took the branch's first step.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Agent string `json:"agent,omitempty"`

	// inputDigest is the digest of the branch's input: the branch run's spec.input has it.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`

	// phase is the branch run's phase as its parent last wrote it: Pending from the fan-out
	// until the branch ends or waits for people (its start costs its parent no write).
	// +optional
	Phase RunPhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: the branch's phase, as its own status has it

	// reason is why the branch ended.
	// +optional
	Reason TerminationReason `json:"reason,omitempty"`

	// tokensUsed is what the branch used, once it ended.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TokensUsed int64 `json:"tokensUsed,omitempty"`

	// cost is what the branch spent, once it ended, as a decimal string.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Cost string `json:"cost,omitempty"`
}
