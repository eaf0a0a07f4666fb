package runview

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Parallel branches, as kubectl baton describe and the console show them: a run's branches are
// AgentRuns labelled with it and controlled by it, each with spec.branch, named as its fan-outs
// name them; the run's status names those of its latest fan-out, with their UIDs once the
// operator wrote them, which is what there is to show when the branches' own runs cannot be
// read. A run of a listed branch's name with another UID is not shown as the branch, whatever
// it carries (workflow.IsBranchOf).

// Branch is one branch of a run, with its own branches.
type Branch struct {
	// Namespace and Name are the branch's AgentRun, whose page and describe have its own
	// timeline.
	Namespace, Name string
	Agent           string
	// Step is the run's step that fanned out, and Index the branch's place in it, from 1.
	Step, Index int32
	Depth       int32
	Phase       v1alpha1.RunPhase
	Reason      v1alpha1.TerminationReason
	Tokens      int64
	Cost        string
	Currency    string
	// Read says the branch's own run was read. A branch that was not is as its parent's status
	// says: its tokens and cost only once it ended, and none of its own branches.
	Read     bool
	Branches []Branch
}

// IsBranch says whether run is a branch of parent: it names parent in spec.branch, parent
// controls it, and it is the run of the UID parent lists for it, if parent lists one. A run that
// only claims a parent is not shown as its branch.
func IsBranch(run, parent *v1alpha1.AgentRun) bool {
	return run.Namespace == parent.Namespace && workflow.IsBranchOf(run, parent)
}

// BranchOf is the run's spec.branch when the run is a branch: an AgentRun of the name it
// names as its parent controls it. A run that only claims a parent, which the operator refuses
// to run, is no branch: nil.
func BranchOf(run *v1alpha1.AgentRun) *v1alpha1.RunBranch {
	b := run.Spec.Branch
	if b == nil {
		return nil
	}
	if c := workflow.RunController(run); c == nil || c.Name != b.Parent {
		return nil
	}
	return b
}

// HasBranches says whether the run ever fanned out.
func HasBranches(run *v1alpha1.AgentRun) bool {
	return run.Status.BranchesStarted > 0 || len(run.Status.Branches) > 0
}

// Branching says whether the run waits for its branches to join: it is Running and its latest
// step fanned out. It takes no step of its own meanwhile.
func Branching(run *v1alpha1.AgentRun) bool {
	seq := run.Status.HandoffSequence
	return run.Status.Phase == v1alpha1.PhaseRunning && len(seq) > 0 && seq[len(seq)-1].Outcome == v1alpha1.OutcomeFanOut
}

// maxBranchLists bounds the lists reading one run's tree costs: one for each run in it that
// fanned out.
const maxBranchLists = 64

// ReadBranches reads the tree of the run's branches with c, a level at a time: the runs labelled
// with each run of the level that fanned out. What it cannot read is as the runs' statuses say,
// and the error says why.
func ReadBranches(ctx context.Context, c client.Reader, run *v1alpha1.AgentRun) ([]Branch, error) {
	var found []v1alpha1.AgentRun
	var errs []error
	level, lists := []*v1alpha1.AgentRun{run}, 0
	for range v1alpha1.MaxDepth {
		var next []*v1alpha1.AgentRun
		for _, p := range level {
			if !HasBranches(p) || lists == maxBranchLists {
				continue
			}
			lists++
			list := &v1alpha1.AgentRunList{}
			if err := c.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{v1alpha1.LabelParent: workflow.ParentLabel(p.Name)}); err != nil {
				errs = append(errs, err)
				continue
			}
			for i := range list.Items {
				if b := &list.Items[i]; IsBranch(b, p) {
					found = append(found, *b)
					next = append(next, b)
				}
			}
		}
		level = next
	}
	return BranchTree(run, found), errors.Join(errs...)
}

// BranchTree is the tree of the run's branches among runs, each branch's own below it, in the
// order of the steps that fanned out and the branches' places. The branches of the run's latest
// fan-out that are not among runs are as its status says.
func BranchTree(run *v1alpha1.AgentRun, runs []v1alpha1.AgentRun) []Branch {
	return branchTree(run, runs, int(v1alpha1.MaxDepth))
}

func branchTree(run *v1alpha1.AgentRun, runs []v1alpha1.AgentRun, levels int) []Branch {
	if levels == 0 {
		return nil
	}
	var out []Branch
	read := map[string]bool{}
	for i := range runs {
		b := &runs[i]
		if !IsBranch(b, run) || read[b.Name] {
			continue
		}
		read[b.Name] = true
		sb := b.Spec.Branch
		out = append(out, Branch{Namespace: b.Namespace, Name: b.Name, Agent: sb.Agent, Step: sb.Step, Index: sb.Index, Depth: sb.Depth,
			Phase: Phase(b), Reason: b.Status.TerminationReason, Tokens: b.Status.TokensUsed, Cost: b.Status.Cost,
			Currency: b.Status.Currency, Read: true, Branches: branchTree(b, runs, levels-1)})
	}
	step, depth := latestFanOut(run), int32(1)
	if run.Spec.Branch != nil {
		depth = run.Spec.Branch.Depth + 1
	}
	for i, b := range run.Status.Branches {
		if read[b.Name] {
			continue
		}
		phase := b.Phase
		if phase == "" {
			phase = v1alpha1.PhasePending
		}
		out = append(out, Branch{Namespace: run.Namespace, Name: b.Name, Agent: b.Agent, Step: step, Index: int32(i + 1), Depth: depth, Phase: phase,
			Reason: b.Reason, Tokens: b.TokensUsed, Cost: b.Cost, Currency: run.Status.Currency})
	}
	slices.SortStableFunc(out, func(a, b Branch) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Index, b.Index), strings.Compare(a.Name, b.Name))
	})
	return out
}

// latestFanOut is the step of the run's latest fan-out that its status still records; 0 when
// it records none.
func latestFanOut(run *v1alpha1.AgentRun) int32 {
	seq := run.Status.HandoffSequence
	for i := len(seq) - 1; i >= 0; i-- {
		if seq[i].Outcome == v1alpha1.OutcomeFanOut {
			return seq[i].Step
		}
	}
	return 0
}

// AttachBranches places each branch under the timeline's entry of the step that fanned it out
// (the entry's index in entries): the step's FanOut entry, else its first. Branches of a step
// the entries do not show are left out, as the step is.
func AttachBranches(entries []Entry, branches []Branch) map[int][]Branch {
	at := map[int32]int{}
	for i, e := range entries {
		if e.Kind != EntryStep {
			continue
		}
		if j, ok := at[e.Step]; !ok || e.Outcome == string(v1alpha1.OutcomeFanOut) && entries[j].Outcome != string(v1alpha1.OutcomeFanOut) {
			at[e.Step] = i
		}
	}
	out := map[int][]Branch{}
	for _, b := range branches {
		if i, ok := at[b.Step]; ok {
			out[i] = append(out[i], b)
		}
	}
	return out
}

// WithoutWorking is the timeline of a run without the step in progress it would show while the
// run waits for its branches: no step is in progress then, and the branches say what is.
func WithoutWorking(run *v1alpha1.AgentRun, entries []Entry) []Entry {
	if !Branching(run) {
		return entries
	}
	return slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool { return e.Kind == EntryRunning })
}

// Phase is the run's phase as people are shown it: Pending until the operator has written one.
func Phase(run *v1alpha1.AgentRun) v1alpha1.RunPhase {
	if run.Status.Phase == "" {
		return v1alpha1.PhasePending
	}
	return run.Status.Phase
}
