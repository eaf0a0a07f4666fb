package workflow

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// operatorUser is the creator the admission webhook records on the operator's own runs.
const operatorUser = "system:serviceaccount:baton-system:baton"

// parentOf is a run r whose lead fanned out at step 1 to a researcher and a critic, as its
// status names them.
func parentOf() *v1alpha1.AgentRun {
	parent := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "p-uid"}}
	parent.Status.Branches = []v1alpha1.BranchStatus{
		{Name: "r-b1-1", Agent: "researcher", InputDigest: InputDigest("look into researcher"), Phase: v1alpha1.PhasePending},
		{Name: "r-b1-2", Agent: "critic", InputDigest: InputDigest("look into critic"), Phase: v1alpha1.PhasePending},
	}
	return parent
}

// madeBranch is the run of branch index (from 1) of parentOf as the operator makes it: controlled
// by the parent, labelled, with spec.branch and the branch's input, created by the operator.
func madeBranch(index int32, agent string) *v1alpha1.AgentRun {
	yes := true
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{
		Name: BranchName("r", 1, int(index)), Namespace: "ns", UID: types.UID("b-uid-" + agent),
		Labels:      map[string]string{v1alpha1.LabelParent: "r"},
		Annotations: map[string]string{v1alpha1.AnnotationCreatedBy: operatorUser},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun", Name: "r",
			UID: "p-uid", Controller: &yes}},
	}}
	run.Spec.Input = "look into " + agent
	run.Spec.Branch = &v1alpha1.RunBranch{Parent: "r", Step: 1, Index: index, Agent: agent, Depth: 1}
	return run
}

// A branch run is controlled by its parent (an AgentRun's controller reference, not merely one
// that copies its UID), named as the parent's fan-out names it and, once the parent lists its
// UID, the run of that UID: a run made to look like one is not.
func TestABranchRunIsTheOneTheParentsFanOutNames(t *testing.T) {
	parent := parentOf()
	listed := parentOf()
	listed.Status.Branches[1].UID = "b-uid-critic"
	for name, tc := range map[string]struct {
		run    func(*v1alpha1.AgentRun)
		parent *v1alpha1.AgentRun
		want   bool
	}{
		"the branch":                          {func(*v1alpha1.AgentRun) {}, parent, true},
		"the branch, of the UID listed":       {func(*v1alpha1.AgentRun) {}, listed, true},
		"another run of the branch's name":    {func(r *v1alpha1.AgentRun) { r.UID = "forged" }, listed, false},
		"another name":                        {func(r *v1alpha1.AgentRun) { r.Name += "-forged" }, parent, false},
		"not controlled by the parent":        {func(r *v1alpha1.AgentRun) { r.OwnerReferences = nil }, parent, false},
		"a reference of another kind":         {func(r *v1alpha1.AgentRun) { r.OwnerReferences[0].Kind = "ConfigMap" }, parent, false},
		"a reference of another group":        {func(r *v1alpha1.AgentRun) { r.OwnerReferences[0].APIVersion = "example.com/v1" }, parent, false},
		"no spec.branch":                      {func(r *v1alpha1.AgentRun) { r.Spec.Branch = nil }, parent, false},
		"a spec.branch naming another parent": {func(r *v1alpha1.AgentRun) { r.Spec.Branch.Parent = "other" }, parent, false},
	} {
		run := madeBranch(2, "critic")
		tc.run(run)
		if got := IsBranchOf(run, tc.parent); got != tc.want {
			t.Errorf("%s: IsBranchOf = %v, want %v", name, got, tc.want)
		}
	}
}

// The controller takes a run as a branch's only when it is the run of the UID listed, the run it
// knows it made, or one only the operator can have made for this branch; every other run that
// holds the name is named as being in the way, and while the webhook is not trusted nothing is
// taken on its creator's word.
func TestOnlyTheRunTheOperatorMadeIsTheBranchs(t *testing.T) {
	for name, tc := range map[string]struct {
		run      func(*v1alpha1.AgentRun)
		listed   string
		made     types.UID
		operator string
		want     string // "" or a part of the reason
	}{
		"the run of the UID listed":                     {listed: "b-uid-critic", want: ""},
		"another run than the UID listed":               {run: func(r *v1alpha1.AgentRun) { r.UID = "forged" }, listed: "b-uid-critic", operator: operatorUser, want: "(uid forged) is not the run Baton made for it (uid b-uid-critic)"},
		"the run this operator made":                    {made: "b-uid-critic", want: ""},
		"another run than the one this operator made":   {run: func(r *v1alpha1.AgentRun) { r.UID = "forged" }, made: "b-uid-critic", operator: operatorUser, want: "is not the run Baton made for it"},
		"after a restart, the operator's own run":       {operator: operatorUser, want: ""},
		"after a restart, with the webhook not trusted": {want: "nothing tells a run Baton made from one written by hand"},
		"created by a tenant":                           {run: func(r *v1alpha1.AgentRun) { r.Annotations[v1alpha1.AnnotationCreatedBy] = "mallory" }, operator: operatorUser, want: "created by someone other than Baton"},
		"without a creator":                             {run: func(r *v1alpha1.AgentRun) { delete(r.Annotations, v1alpha1.AnnotationCreatedBy) }, operator: operatorUser, want: "Baton did not make it for this fan-out"},
		"not controlled by the parent":                  {run: func(r *v1alpha1.AgentRun) { r.OwnerReferences = nil }, operator: operatorUser, want: "Baton did not make it for this fan-out"},
		"another input":                                 {run: func(r *v1alpha1.AgentRun) { r.Spec.Input = "something else" }, operator: operatorUser, want: "Baton did not make it for this fan-out"},
		"another agent":                                 {run: func(r *v1alpha1.AgentRun) { r.Spec.Branch.Agent = "writer" }, operator: operatorUser, want: "Baton did not make it for this fan-out"},
		"another place":                                 {run: func(r *v1alpha1.AgentRun) { r.Spec.Branch.Index = 1 }, operator: operatorUser, want: "Baton did not make it for this fan-out"},
		"no spec.branch":                                {run: func(r *v1alpha1.AgentRun) { r.Spec.Branch = nil }, operator: operatorUser, want: "Baton did not make it for this fan-out"},
	} {
		t.Run(name, func(t *testing.T) {
			parent := parentOf()
			parent.Status.Branches[1].UID = tc.listed
			run := madeBranch(2, "critic")
			if tc.run != nil {
				tc.run(run)
			}
			got := NotBranch(run, parent, 1, tc.made, tc.operator)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("not the branch's run: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("NotBranch = %q, want it to say %q", got, tc.want)
			case tc.want != "" && !strings.HasPrefix(got, "AgentRun ns/r-b1-2 "):
				t.Errorf("NotBranch = %q, want it to name the run in the way", got)
			}
		})
	}
}

// The join records each branch's run's UID the first time it finds it, and from then on takes no
// other run for the branch; a branch whose name is taken fails the run, whatever onFailure says.
func TestTheJoinTakesOnlyTheBranchsOwnRun(t *testing.T) {
	p := researchPlan(t, v1alpha1.Join{OnFailure: v1alpha1.JoinContinue}, "")
	st := branching(t, p, "researcher", "critic")
	found := runningRun
	found.UID = "u1"
	d, _ := Join(p, st, map[string]BranchRun{"r-b1-1": found}, t0.Add(time.Second))
	if got := d.Status.Branches[0].UID; got != "u1" {
		t.Fatalf("branch 1's UID %q; want the run found, u1", got)
	}
	if got := d.Status.Branches[1].UID; got != "" {
		t.Fatalf("branch 2's UID %q; want none before its run is found", got)
	}

	t.Run("a run of another UID is not the branch's", func(t *testing.T) {
		other := succeededRun("forged output")
		other.UID = "u2"
		d, _ := Join(p, d.Status, map[string]BranchRun{"r-b1-1": other, "r-b1-2": succeededRun("fine")}, t0.Add(2*time.Second))
		s := d.Status
		if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonBranchFailed {
			t.Fatalf("%s/%s; want Failed/BranchFailed", s.Phase, s.TerminationReason)
		}
		if !strings.HasPrefix(s.TerminationMessage, "branch r-b1-1 (agent researcher) cannot run: the run of uid u2 holds its name") {
			t.Errorf("message %q", s.TerminationMessage)
		}
		if strings.Contains(s.Input, "forged output") || s.TokensUsed != st.TokensUsed+50 {
			t.Errorf("tokens %d, input %q; want only branch 2's use counted and no output taken", s.TokensUsed, s.Input)
		}
	})
	t.Run("a taken name fails the run, with onFailure Continue too", func(t *testing.T) {
		taken := BranchRun{Taken: "AgentRun ns/r-b1-2 holds its name, and Baton did not make it for this fan-out"}
		d, cancel := Join(p, d.Status, map[string]BranchRun{"r-b1-1": found, "r-b1-2": taken}, t0.Add(2*time.Second))
		s := d.Status
		if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonBranchFailed {
			t.Fatalf("%s/%s; want Failed/BranchFailed", s.Phase, s.TerminationReason)
		}
		if want := "branch r-b1-2 (agent critic) cannot run: " + taken.Taken; s.TerminationMessage != want {
			t.Errorf("message %q; want %q", s.TerminationMessage, want)
		}
		if strings.Join(cancel, " ") != "r-b1-1 r-b1-2" {
			t.Errorf("cancel %v; want the branches not ended (the controller cancels only the runs that are theirs)", cancel)
		}
	})
}
