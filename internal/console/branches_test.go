package console

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/workflow"
)

// makeRun is a run of the research config in namespace review, created at the given minute.
func makeRun(name, uid string, minute int) *v1alpha1.AgentRun {
	return &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "review", UID: types.UID(uid),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 22, 11, minute, 0, 0, time.UTC))},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "research"}, Input: "Survey the field"}}
}

// branchOfRun makes run a branch of parent, as the operator makes one: labelled with the
// parent, controlled by it, with spec.branch.
func branchOfRun(run, parent *v1alpha1.AgentRun, step, index int32, agent string) *v1alpha1.AgentRun {
	depth := int32(1)
	if parent.Spec.Branch != nil {
		depth = parent.Spec.Branch.Depth + 1
	}
	run.Labels = map[string]string{v1alpha1.LabelParent: workflow.ParentLabel(parent.Name)}
	run.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun",
		Name: parent.Name, UID: parent.UID, Controller: ptr.To(true)}}
	run.Spec.Branch = &v1alpha1.RunBranch{Parent: parent.Name, Step: step, Index: index, Agent: agent, Depth: depth}
	run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "system:serviceaccount:baton-system:baton"}
	return run
}

// fannedOut is a run whose step 1 fanned out to web and papers; web's step 2 fanned out to deep,
// which waits at gate publish. claims names the run as its parent, which does not control it.
type tree struct {
	parent, web, papers, deep, claims *v1alpha1.AgentRun
}

func fannedOut() tree {
	at := metav1.NewTime(time.Date(2026, 11, 22, 11, 1, 0, 0, time.UTC))
	parent := makeRun("research-1", "p1", 0)
	parent.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}
	parent.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, CurrentAgent: "web,papers", StepCount: 1, HandoffCount: 1,
		TokensUsed: 100, Currency: "USD", BranchesStarted: 2,
		HandoffSequence: []v1alpha1.HandoffRecord{{Step: 1, From: "lead", To: "web,papers", Outcome: v1alpha1.OutcomeFanOut,
			Reason: "fan-out to 2 branches", Tokens: 100, Time: at}},
		Branches: []v1alpha1.BranchStatus{{Name: "research-1-b1-1", Agent: "web", Phase: v1alpha1.PhaseRunning},
			{Name: "research-1-b1-2", Agent: "papers", Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, TokensUsed: 200, Cost: "0.0004"}}}

	web := branchOfRun(makeRun("research-1-b1-1", "c1", 2), parent, 1, 1, "web")
	web.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, CurrentAgent: "deep", StepCount: 2, TokensUsed: 120, BranchesStarted: 1,
		HandoffSequence: []v1alpha1.HandoffRecord{{Step: 2, From: "web", To: "deep", Outcome: v1alpha1.OutcomeFanOut, Time: at}},
		Branches:        []v1alpha1.BranchStatus{{Name: "research-1-b1-1-b2-1", Agent: "deep", Phase: v1alpha1.PhaseAwaitingApproval}}}
	papers := branchOfRun(makeRun("research-1-b1-2", "c2", 2), parent, 1, 2, "papers")
	papers.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TerminationReason: v1alpha1.ReasonCompleted, StepCount: 1,
		TokensUsed: 200, Cost: "0.0004", Currency: "USD"}
	deep := branchOfRun(makeRun("research-1-b1-1-b2-1", "g1", 3), web, 2, 1, "deep")
	deep.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval, CurrentAgent: "deep", StepCount: 1, TokensUsed: 40,
		PendingApproval: &v1alpha1.PendingApproval{Gate: "publish", Since: metav1.NewMicroTime(at.Add(time.Minute))}}

	// Written by a person: spec.branch and the label, but its parent does not control it.
	claims := makeRun("claims", "x1", 4)
	claims.Labels = map[string]string{v1alpha1.LabelParent: "research-1"}
	claims.Spec.Branch = &v1alpha1.RunBranch{Parent: "research-1", Step: 1, Index: 3, Agent: "web", Depth: 1}
	return tree{parent: parent, web: web, papers: papers, deep: deep, claims: claims}
}

func TestTreeRowsListBranchesUnderTheirParents(t *testing.T) {
	f := fannedOut()
	other := makeRun("other", "o1", 9)
	orphan := branchOfRun(makeRun("gone-b1-1", "o2", 5), makeRun("gone", "o3", 0), 1, 1, "web")
	for name, c := range map[string]struct {
		runs []*v1alpha1.AgentRun
		want []string
	}{
		"newest first, each run's branches below it, deeper for theirs": {
			runs: []*v1alpha1.AgentRun{other, f.claims, f.deep, f.papers, f.web, f.parent},
			want: []string{"other", "claims", "research-1", "  research-1-b1-1", "    research-1-b1-1-b2-1", "  research-1-b1-2"},
		},
		"a branch whose parent is not listed is listed in its own place": {
			runs: []*v1alpha1.AgentRun{other, orphan, f.deep, f.papers},
			want: []string{"other", "gone-b1-1", "research-1-b1-1-b2-1", "research-1-b1-2"},
		},
		"runs that claim each other are each listed once, on their own": {
			// Neither is named as the other's fan-out names its branches.
			runs: func() []*v1alpha1.AgentRun {
				a, b := makeRun("a", "ua", 1), makeRun("b", "ub", 2)
				return []*v1alpha1.AgentRun{branchOfRun(a, b, 1, 1, "web"), branchOfRun(b, a, 1, 1, "web")}
			}(),
			want: []string{"a", "b"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var runs []v1alpha1.AgentRun
			for _, r := range c.runs {
				runs = append(runs, *r)
			}
			var got []string
			for _, row := range treeRows(runs) {
				got = append(got, strings.Repeat("  ", row.Depth)+row.Run.Name)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTheTeamOfARunThatFannedOutHandsOffToEachBranchsAgent(t *testing.T) {
	f := fannedOut()
	joined := f.parent.DeepCopy()
	joined.Status.CurrentAgent = "lead"
	fanOut := runview.Entry{Kind: runview.EntryStep, Step: 1, Agent: "lead", To: "web,papers", Outcome: string(v1alpha1.OutcomeFanOut)}
	join := runview.Entry{Kind: runview.EntryStep, Step: 1, Agent: "web,papers", To: "lead", Outcome: string(v1alpha1.OutcomeJoined)}
	for name, c := range map[string]struct {
		run     *v1alpha1.AgentRun
		entries []runview.Entry
		edges   []string
		current []string
	}{
		"while the branches run": {run: f.parent, entries: runview.BuildTimeline(f.parent, nil),
			edges: []string{"lead→papers 1", "lead→web 1"}, current: []string{"web", "papers"}},
		"once they joined": {run: joined, entries: []runview.Entry{fanOut, join},
			edges: []string{"lead→papers 1", "lead→web 1", "papers→lead 1", "web→lead 1"}, current: []string{"lead"}},
	} {
		t.Run(name, func(t *testing.T) {
			tm := team(researchConfig(), c.run, c.entries)
			var nodes, current, edges []string
			steps := map[string]int{}
			for _, n := range tm.Nodes {
				nodes = append(nodes, n.Name)
				steps[n.Name] = n.Steps
				if n.Current {
					current = append(current, n.Name)
				}
			}
			for _, e := range tm.Edges {
				if e.Taken {
					edges = append(edges, e.From+"→"+e.To+" "+strconv.Itoa(e.Count))
				}
			}
			if diff := cmp.Diff([]string{"lead", "web", "papers", "deep"}, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int{"lead": 1, "web": 0, "papers": 0, "deep": 0}, steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.edges, edges); diff != "" {
				t.Errorf("handoffs taken (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.current, current); diff != "" {
				t.Errorf("current agents (-want +got):\n%s", diff)
			}
		})
	}
}

// Once a run's status lists a branch's UID, only the run of that UID is shown as the branch: a
// run of its name with another UID, whatever it carries, is not listed under the run (the tree
// of a run's branches leaves it out too: runview's test of the same name).
func TestABranchIsShownOnlyAsTheRunOfItsUID(t *testing.T) {
	f := fannedOut()
	f.parent.Status.Branches[0].UID, f.parent.Status.Branches[1].UID = "c1", "c2"
	impostor := branchOfRun(makeRun("research-1-b1-1", "forged", 3), f.parent, 1, 1, "web")
	impostor.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TerminationReason: v1alpha1.ReasonCompleted, TokensUsed: 9999}

	var rows []string
	for _, row := range treeRows([]v1alpha1.AgentRun{*f.parent, *impostor, *f.papers}) {
		rows = append(rows, strings.Repeat("  ", row.Depth)+row.Run.Name+"/"+string(row.Run.UID))
	}
	if diff := cmp.Diff([]string{"research-1/p1", "  research-1-b1-2/c2", "research-1-b1-1/forged"}, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// A branch's creator is its root run's; with its parent not found, or another run under its
// parent's name, it is not known (the operator holds the branch's gates to nobody then), never
// the operator that created the branch run.
func TestABranchsCreatorIsItsRootRunsOrUnknown(t *testing.T) {
	f := fannedOut()
	runs := map[string]*v1alpha1.AgentRun{}
	for _, r := range []*v1alpha1.AgentRun{f.parent, f.web, f.papers, f.deep} {
		runs[r.Name] = r
	}
	get := func(name string) *v1alpha1.AgentRun { return runs[name] }
	if got := creatorOfRoot(f.deep, get); got != "alice" {
		t.Errorf("a branch of a branch: creator %q, want the root run's, alice", got)
	}
	orphan := branchOfRun(makeRun("gone-b1-1", "o2", 5), makeRun("gone", "o3", 0), 1, 1, "web")
	if got := creatorOfRoot(orphan, get); got != "" {
		t.Errorf("a branch whose parent is gone: creator %q, want none", got)
	}
	runs["research-1"] = makeRun("research-1", "another", 7)
	runs["research-1"].Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "mallory"}
	if got := creatorOfRoot(f.web, get); got != "" {
		t.Errorf("a branch whose parent's name another run holds now: creator %q, want none", got)
	}
}
