package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// controlledBy gives run a controller reference to the run named parent.
func controlledBy(run *v1alpha1.AgentRun, apiVersion, kind, parent string) {
	yes := true
	run.OwnerReferences = append(run.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: parent,
		UID: "victim-uid", Controller: &yes})
}

// asBranch gives run the marks of a branch of the run named victim, as a forger would.
func asBranch(run *v1alpha1.AgentRun) {
	run.Name = "victim-b1-1"
	run.Labels = map[string]string{v1alpha1.LabelParent: "victim"}
	controlledBy(run, v1alpha1.GroupVersion.String(), "AgentRun", "victim")
	run.Spec.Branch = &v1alpha1.RunBranch{Parent: "victim", Step: 1, Index: 1, Agent: "researcher", Depth: 1}
}

// Nobody but the operator may create a run with a mark of a branch (spec.branch, the parent
// label, a controller reference to an AgentRun), or give one to a run later; the refusal names
// what is refused and why. The operator may; what is no mark (a reference that does not control,
// a controller of another kind) and taking a controller reference away are allowed.
func TestOnlyTheOperatorMakesBranchRuns(t *testing.T) {
	yes := true
	for name, tc := range map[string]struct {
		user string
		// create is the run created; or old and edit make an update of old.
		create func(*v1alpha1.AgentRun)
		old    func(*v1alpha1.AgentRun)
		edit   func(*v1alpha1.AgentRun)
		refuse string // "" when allowed, else what the refusal names
	}{
		"a tenant's run with spec.branch": {create: func(r *v1alpha1.AgentRun) {
			r.Spec.Branch = &v1alpha1.RunBranch{Parent: "victim", Step: 1, Index: 1, Agent: "researcher", Depth: 1}
		}, refuse: "with spec.branch:"},
		"a tenant's run with the parent label": {create: func(r *v1alpha1.AgentRun) {
			r.Labels = map[string]string{v1alpha1.LabelParent: "victim"}
		}, refuse: "with the label agents.baton.dev/parent:"},
		"a tenant's run controlled by an AgentRun": {create: func(r *v1alpha1.AgentRun) {
			controlledBy(r, v1alpha1.GroupVersion.String(), "AgentRun", "victim")
		}, refuse: "with a controller reference to an AgentRun:"},
		"a retry of a branch run, which copies its spec": {create: func(r *v1alpha1.AgentRun) {
			r.Name, r.GenerateName = "", "victim-b1-1-retry-"
			r.Spec.Branch = &v1alpha1.RunBranch{Parent: "victim", Step: 1, Index: 1, Agent: "researcher", Depth: 1}
		}, refuse: "may not create AgentRun team-a/victim-b1-1-retry-* with spec.branch:"},
		"a tenant's forged branch, with all three": {create: asBranch,
			refuse: "with spec.branch and the label agents.baton.dev/parent and a controller reference to an AgentRun:"},
		"the operator's branch run": {user: operatorUser, create: asBranch},
		"a tenant's run with a reference to an AgentRun that does not control it": {create: func(r *v1alpha1.AgentRun) {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun", Name: "victim", UID: "victim-uid"}}
		}},
		"a tenant's run controlled by an object of another kind": {create: func(r *v1alpha1.AgentRun) {
			controlledBy(r, "example.com/v1", "Pipeline", "nightly")
		}},
		"a tenant's label added later": {old: func(*v1alpha1.AgentRun) {}, edit: func(r *v1alpha1.AgentRun) {
			r.Labels = map[string]string{v1alpha1.LabelParent: "victim"}
		}, refuse: "may not update AgentRun team-a/mine with a change of the label agents.baton.dev/parent:"},
		"a tenant's change of a branch's label": {old: asBranch, edit: func(r *v1alpha1.AgentRun) {
			r.Labels[v1alpha1.LabelParent] = "other"
		}, refuse: "a change of the label agents.baton.dev/parent"},
		"a tenant's removal of a branch's label": {old: asBranch, edit: func(r *v1alpha1.AgentRun) {
			delete(r.Labels, v1alpha1.LabelParent)
		}, refuse: "a change of the label agents.baton.dev/parent"},
		"a tenant's controller reference added later": {old: func(*v1alpha1.AgentRun) {}, edit: func(r *v1alpha1.AgentRun) {
			controlledBy(r, v1alpha1.GroupVersion.String(), "AgentRun", "victim")
		}, refuse: "with a new controller reference to an AgentRun:"},
		"a tenant's reference made a controller later": {old: func(r *v1alpha1.AgentRun) {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun", Name: "victim", UID: "victim-uid"}}
		}, edit: func(r *v1alpha1.AgentRun) { r.OwnerReferences[0].Controller = &yes }, refuse: "a new controller reference to an AgentRun"},
		"a controller reference taken away (the garbage collector's orphaning)": {old: asBranch, edit: func(r *v1alpha1.AgentRun) {
			r.OwnerReferences = nil
		}},
		"another label of a branch run changed":  {old: asBranch, edit: func(r *v1alpha1.AgentRun) { r.Labels["team"] = "a" }},
		"the operator's own update of the marks": {user: operatorUser, old: func(*v1alpha1.AgentRun) {}, edit: asBranch},
	} {
		t.Run(name, func(t *testing.T) {
			w := testWebhook(t, nil)
			user := tc.user
			if user == "" {
				user = "mallory"
			}
			var req admission.Request
			if tc.create != nil {
				run := plainRun()
				tc.create(run)
				req = request(t, admissionv1.Create, user, run, nil)
			} else {
				old := plainRun()
				tc.old(old)
				old.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "mallory"}
				run := old.DeepCopy()
				tc.edit(run)
				req = request(t, admissionv1.Update, user, run, old)
			}
			res := w.Handle(context.Background(), req)
			switch {
			case tc.refuse == "" && !res.Allowed:
				t.Fatalf("refused: %s", res.Result.Message)
			case tc.refuse != "" && res.Allowed:
				t.Fatal("allowed; want it refused")
			case tc.refuse != "" && !strings.Contains(res.Result.Message, tc.refuse):
				t.Fatalf("refusal %q; want it to name %q", res.Result.Message, tc.refuse)
			case tc.refuse != "" && !strings.Contains(res.Result.Message, `user "mallory" may not `) ||
				tc.refuse != "" && !strings.HasSuffix(res.Result.Message, "only Baton makes branch runs, for a run's fan-out"):
				t.Fatalf("refusal %q; want it to say who may not do what, and why", res.Result.Message)
			}
		})
	}
}

// A person decides at a branch's gates as at any run's: an update that carries the branch's
// marks unchanged is no attempt to make a branch.
func TestABranchsGatesAreDecidedOnTheBranchRun(t *testing.T) {
	w := testWebhook(t, rbac{"alice": {v1alpha1.ApproveVerb}})
	old := plainRun()
	asBranch(old)
	old.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: operatorUser}
	old.Status.Phase = v1alpha1.PhaseAwaitingApproval
	run := old.DeepCopy()
	run.Annotations[v1alpha1.AnnotationApprove] = "plan"
	res := w.Handle(context.Background(), request(t, admissionv1.Update, "alice", run, old))
	if !res.Allowed {
		t.Fatalf("alice's approval at a branch's gate was refused: %s", res.Result.Message)
	}
	if len(res.Patches) == 0 {
		t.Fatal("the approval was not queued")
	}
}
