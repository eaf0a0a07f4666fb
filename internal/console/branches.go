package console

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/workflow"
)

// runRow is a run as the runs list shows it: under its parent when it is a branch of a run
// listed above it.
type runRow struct {
	Run *v1alpha1.AgentRun
	// Depth is how far under the run above it the row is drawn: 0 for a run listed on its own.
	Depth int
	// Branch is what the run is a branch of, for a branch.
	Branch *v1alpha1.RunBranch
}

// treeRows lists runs in their order, each followed by its branches (by the step that fanned
// them out and their places), and theirs. A branch whose parent is not among runs is listed in
// its own place.
func treeRows(runs []v1alpha1.AgentRun) []runRow {
	index := make(map[string]int, len(runs))
	for i := range runs {
		index[runs[i].Namespace+"/"+runs[i].Name] = i
	}
	children := map[int][]int{}
	var roots []int
	for i := range runs {
		b := runview.BranchOf(&runs[i])
		if b == nil {
			roots = append(roots, i)
			continue
		}
		p, ok := index[runs[i].Namespace+"/"+b.Parent]
		if !ok || !runview.IsBranch(&runs[i], &runs[p]) {
			roots = append(roots, i)
			continue
		}
		children[p] = append(children[p], i)
	}
	for _, c := range children {
		slices.SortStableFunc(c, func(a, b int) int {
			x, y := runs[a].Spec.Branch, runs[b].Spec.Branch
			return cmp.Or(cmp.Compare(x.Step, y.Step), cmp.Compare(x.Index, y.Index))
		})
	}
	out := make([]runRow, 0, len(runs))
	seen := make([]bool, len(runs))
	var add func(i, depth int)
	add = func(i, depth int) {
		if seen[i] {
			return
		}
		seen[i] = true
		out = append(out, runRow{Run: &runs[i], Depth: depth, Branch: runview.BranchOf(&runs[i])})
		for _, c := range children[i] {
			add(c, depth+1)
		}
	}
	for _, i := range roots {
		add(i, 0)
	}
	// Runs that claim each other as parents are no one's branches: each is listed on its own.
	for i := range runs {
		add(i, 0)
	}
	return out
}

// Class is the row's class: a branch's, drawn as deep under its parent as it is, to a point.
func (r runRow) Class() string {
	if r.Depth == 0 {
		return ""
	}
	return fmt.Sprintf("branch depth-%d", min(r.Depth, maxDrawnDepth))
}

// maxDrawnDepth is the deepest a row is drawn under its parent: deeper branches are drawn as
// deep, so that a narrow screen keeps room for the row.
const maxDrawnDepth = 4

// rootOf is the run whose branches' branches run is, as get finds runs by name in run's
// namespace: the run itself when it is no branch. Who created the root run is the creator of
// all its branches, as the operator holds them to. A parent not found, or not controlling the
// branch, leaves no root (nil): the branch's creator is not known, as the operator holds it.
func rootOf(run *v1alpha1.AgentRun, get func(name string) *v1alpha1.AgentRun) *v1alpha1.AgentRun {
	for range v1alpha1.MaxDepth + 1 {
		if run.Spec.Branch == nil {
			return run
		}
		parent := get(run.Spec.Branch.Parent)
		if parent == nil || !workflow.ControlledBy(run, parent) {
			return nil
		}
		run = parent
	}
	return nil
}

// creatorOfRoot is who created the root run of run's tree of branches; empty when not known.
func creatorOfRoot(run *v1alpha1.AgentRun, get func(name string) *v1alpha1.AgentRun) string {
	if root := rootOf(run, get); root != nil {
		return root.Annotations[v1alpha1.AnnotationCreatedBy]
	}
	return ""
}
