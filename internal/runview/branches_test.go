package runview

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
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

// The branches are found by the label the operator writes on them, whatever the length of
// their parent's name: past 63 characters, a label value is the name cut and a digest of it.
func TestBranchesAreFoundByTheLabelTheOperatorWrites(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for name, parentName := range map[string]string{
		"a short name":                       "research-1",
		"63 characters, the most it keeps":   strings.Repeat("a", 63),
		"64 characters, cut with a digest":   strings.Repeat("a", 64),
		"the longest name a run may have":    strings.Repeat("r", 200) + "-b12-3" + strings.Repeat("x", 47),
		"a cut that ends at a dash or a dot": strings.Repeat("a", 53) + "-.b" + strings.Repeat("c", 20),
	} {
		t.Run(name, func(t *testing.T) {
			parent := makeRun(parentName, "p1", 0)
			parent.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, BranchesStarted: 1}
			branch := branchOfRun(makeRun(workflow.BranchName(parentName, 1, 1), "c1", 1), parent, 1, 1, "web")
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(branch).Build()
			tree, err := ReadBranches(context.Background(), kube, parent)
			if err != nil {
				t.Fatal(err)
			}
			if len(tree) != 1 || !tree[0].Read || tree[0].Name != branch.Name {
				t.Errorf("the branches of %q, labelled %q: %+v; want its one branch, read", parentName, branch.Labels[v1alpha1.LabelParent], tree)
			}
		})
	}
}

func TestBranchTree(t *testing.T) {
	f := fannedOut()
	deep := Branch{Namespace: "review", Name: "research-1-b1-1-b2-1", Agent: "deep", Step: 2, Index: 1, Depth: 2,
		Phase: v1alpha1.PhaseAwaitingApproval, Tokens: 40, Read: true}
	web := Branch{Namespace: "review", Name: "research-1-b1-1", Agent: "web", Step: 1, Index: 1, Depth: 1,
		Phase: v1alpha1.PhaseRunning, Tokens: 120, Read: true, Branches: []Branch{deep}}
	papers := Branch{Namespace: "review", Name: "research-1-b1-2", Agent: "papers", Step: 1, Index: 2, Depth: 1,
		Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, Tokens: 200, Cost: "0.0004", Currency: "USD", Read: true}
	// What the parent's status says of its branches, and web's of its own.
	webFromStatus := Branch{Namespace: "review", Name: "research-1-b1-1", Agent: "web", Step: 1, Index: 1, Depth: 1,
		Phase: v1alpha1.PhaseRunning, Currency: "USD"}
	papersFromStatus := papers
	papersFromStatus.Read, papersFromStatus.Currency = false, "USD"
	deepFromStatus := Branch{Namespace: "review", Name: "research-1-b1-1-b2-1", Agent: "deep", Step: 2, Index: 1, Depth: 2,
		Phase: v1alpha1.PhaseAwaitingApproval}
	webWithoutDeep := web
	webWithoutDeep.Branches = []Branch{deepFromStatus}

	for name, c := range map[string]struct {
		runs []*v1alpha1.AgentRun
		want []Branch
	}{
		"every branch read, by step and place, each under its parent": {
			runs: []*v1alpha1.AgentRun{f.deep, f.papers, f.web, f.parent}, want: []Branch{web, papers},
		},
		"a run that names the parent without its control is no branch": {
			runs: []*v1alpha1.AgentRun{f.claims, f.web, f.papers, f.deep}, want: []Branch{web, papers},
		},
		"branches not read are as their parents' statuses say": {
			runs: []*v1alpha1.AgentRun{f.web}, want: []Branch{webWithoutDeep, papersFromStatus},
		},
		"nothing read: the parent's status": {
			want: []Branch{webFromStatus, papersFromStatus},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var runs []v1alpha1.AgentRun
			for _, r := range c.runs {
				runs = append(runs, *r)
			}
			if diff := cmp.Diff(c.want, BranchTree(f.parent, runs)); diff != "" {
				t.Errorf("the tree (-want +got):\n%s", diff)
			}
		})
	}
	if got := BranchTree(makeRun("plain", "u9", 0), nil); got != nil {
		t.Errorf("a run that never fanned out has branches %v", got)
	}
}

func TestAttachBranchesPutsThemUnderTheStepThatFannedOut(t *testing.T) {
	b1 := []Branch{{Name: "r-b1-1", Step: 1, Index: 1}, {Name: "r-b1-2", Step: 1, Index: 2}}
	b3 := []Branch{{Name: "r-b3-1", Step: 3, Index: 1}}
	step := func(n int32, outcome v1alpha1.StepOutcome) Entry {
		return Entry{Kind: EntryStep, Step: n, Outcome: string(outcome)}
	}
	decision := Entry{Kind: EntryDecision, Step: 1}
	for name, c := range map[string]struct {
		entries []Entry
		want    map[int][]Branch
	}{
		"each fan-out's branches under its step": {
			entries: []Entry{step(1, v1alpha1.OutcomeFanOut), decision, step(2, v1alpha1.OutcomeHandoff), step(3, v1alpha1.OutcomeFanOut)},
			want:    map[int][]Branch{0: b1, 3: b3},
		},
		"under the step's FanOut entry when its join has one too": {
			entries: []Entry{decision, step(1, v1alpha1.OutcomeJoined), step(1, v1alpha1.OutcomeFanOut), step(3, v1alpha1.OutcomeFanOut)},
			want:    map[int][]Branch{2: b1, 3: b3},
		},
		"under the step's entry whatever it says, when it is the only one": {
			entries: []Entry{step(1, v1alpha1.OutcomeJoined), step(3, "")},
			want:    map[int][]Branch{0: b1, 1: b3},
		},
		"not at all when the step is not shown": {
			entries: []Entry{step(2, v1alpha1.OutcomeHandoff), step(3, v1alpha1.OutcomeFanOut)},
			want:    map[int][]Branch{1: b3},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, AttachBranches(c.entries, append(b1, b3...))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithoutWorkingWhileTheRunBranches(t *testing.T) {
	f := fannedOut()
	running := Entry{Kind: EntryRunning, Step: 2, Agent: "web,papers"}
	entries := []Entry{{Kind: EntryStep, Step: 1, Outcome: string(v1alpha1.OutcomeFanOut)}, running}
	if got := WithoutWorking(f.parent, entries); len(got) != 1 || got[0].Kind != EntryStep {
		t.Errorf("a run waiting for its branches is shown working: %v", got)
	}
	joined := f.parent.DeepCopy()
	joined.Status.HandoffSequence = append(joined.Status.HandoffSequence, v1alpha1.HandoffRecord{Step: 1, Outcome: v1alpha1.OutcomeJoined})
	if got := WithoutWorking(joined, entries); len(got) != 2 {
		t.Errorf("a run that joined its branches and works is not shown working: %v", got)
	}
}

// Once a run's status lists a branch's UID, only the run of that UID is shown as the branch: a
// run of its name with another UID, whatever it carries, is not read as the branch, and the
// branch is as the run's status says.
func TestABranchIsShownOnlyAsTheRunOfItsUID(t *testing.T) {
	f := fannedOut()
	f.parent.Status.Branches[0].UID, f.parent.Status.Branches[1].UID = "c1", "c2"
	impostor := branchOfRun(makeRun("research-1-b1-1", "forged", 3), f.parent, 1, 1, "web")
	impostor.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TerminationReason: v1alpha1.ReasonCompleted, TokensUsed: 9999}

	tree := BranchTree(f.parent, []v1alpha1.AgentRun{*impostor, *f.papers})
	webFromStatus := Branch{Namespace: "review", Name: "research-1-b1-1", Agent: "web", Step: 1, Index: 1, Depth: 1,
		Phase: v1alpha1.PhaseRunning, Currency: "USD"}
	if diff := cmp.Diff(webFromStatus, tree[0]); diff != "" {
		t.Errorf("branch 1 with a run of another UID under its name (-want +got):\n%s", diff)
	}
	if !tree[1].Read {
		t.Error("branch 2, the run of its UID, was not read")
	}
	if tree = BranchTree(f.parent, []v1alpha1.AgentRun{*f.web}); !tree[0].Read || tree[0].Tokens != 120 {
		t.Errorf("branch 1, the run of its UID: %+v", tree[0])
	}

}
