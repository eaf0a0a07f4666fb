package workflow

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Which run is a fan-out's branch. Anyone who may create runs in a namespace can write one named
// like a branch, with the parent label, spec.branch and a controller reference that copies the
// parent's UID (the admission webhook refuses that now, but a run written before it was
// installed, or while it was not, stays). A reader that goes by name, label or owner reference
// would take it for the branch: the join would take its output as the branch's, a cancel would
// patch it. So a branch's run is the run of the UID its parent's status lists for it; before the
// status lists one (the status that names a branch is written before its run is made), the run
// the operator knows it made, or one only the operator can have made (NotBranch).

// RunController is obj's controller reference when an AgentRun controls it; nil otherwise. A
// reference of another kind or group that copies an AgentRun's UID is not one.
func RunController(obj metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "AgentRun" {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1alpha1.GroupVersion.Group {
		return nil
	}
	return ref
}

// ControlledBy reports whether the AgentRun parent controls obj: obj's controller reference is
// to an AgentRun, of the parent's UID.
func ControlledBy(obj metav1.Object, parent *v1alpha1.AgentRun) bool {
	ref := RunController(obj)
	return ref != nil && ref.UID == parent.UID
}

// ListedBranch is the place (from 0) of the branch of that name in the run's status.branches.
func ListedBranch(st *v1alpha1.AgentRunStatus, name string) (int, bool) {
	for i := range st.Branches {
		if st.Branches[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

// IsBranchOf reports whether run is a branch run of parent: controlled by it, named as the
// parent's fan-out names its branches, and, when the parent's status lists the branch with its
// UID, the run of that UID. A run someone else made to look like one is not. Readers that know
// no more than the two runs (the console, kubectl baton, a replay) go by it; the controller,
// which knows what it made, goes by NotBranch.
func IsBranchOf(run, parent *v1alpha1.AgentRun) bool {
	b := run.Spec.Branch
	if b == nil || !ControlledBy(run, parent) || b.Parent != parent.Name || run.Name != BranchName(parent.Name, b.Step, int(b.Index)) {
		return false
	}
	if i, ok := ListedBranch(&parent.Status, run.Name); ok && parent.Status.Branches[i].UID != "" {
		return parent.Status.Branches[i].UID == string(run.UID)
	}
	return true
}

// NotBranch says why run, which holds the name of branch i (from 0) of the parent's current
// fan-out, is not that branch's run, if it is not: "" when it is.
//
// The branch's run is the run of the UID the parent's status lists for it. Until the status
// lists one, it is the run of the UID made: the run this operator made for it and knows it did
// (empty when it does not know, after a restart). Without either, it is a run only the operator
// can have made for this branch: controlled by the parent, its spec.branch and input the
// branch's, and created by operator, the user the admission webhook records as the creator of
// the operator's own runs, which nobody else can have while the webhook is installed. operator
// is empty when the webhook is not trusted: a run the operator made before a restart cannot then
// be told from one written by hand, and it is not taken.
func NotBranch(run, parent *v1alpha1.AgentRun, i int, made types.UID, operator string) string {
	b := parent.Status.Branches[i]
	in := fmt.Sprintf("AgentRun %s/%s", run.Namespace, run.Name)
	switch {
	case b.UID != "" && string(run.UID) == b.UID, b.UID == "" && made != "" && run.UID == made:
		return ""
	case b.UID != "":
		return fmt.Sprintf("%s (uid %s) is not the run Baton made for it (uid %s)", in, run.UID, b.UID)
	case made != "":
		return fmt.Sprintf("%s (uid %s) is not the run Baton made for it (uid %s)", in, run.UID, made)
	}
	s := run.Spec.Branch
	if s == nil || !ControlledBy(run, parent) || s.Parent != parent.Name || s.Index != int32(i+1) || s.Agent != b.Agent ||
		run.Name != BranchName(parent.Name, s.Step, i+1) || InputDigest(run.Spec.Input) != b.InputDigest ||
		run.Annotations[v1alpha1.AnnotationCreatedBy] == "" {
		return fmt.Sprintf("%s holds its name, and Baton did not make it for this fan-out", in)
	}
	if operator == "" {
		return fmt.Sprintf("%s holds its name, and while the admission webhook is not seen installed nothing tells a run Baton made from one written by hand", in)
	}
	if run.Annotations[v1alpha1.AnnotationCreatedBy] != operator {
		return fmt.Sprintf("%s holds its name, and was created by someone other than Baton", in)
	}
	return ""
}

// CheckBranch says why the parent does not vouch for the run as its branch, if it does not:
// the parent controls it, its status lists it with the run's agent and input, the run's limits
// are its share, its approvals and depth are the parent's.
func CheckBranch(run, parent *v1alpha1.AgentRun, parentPlan *Plan) string {
	b := run.Spec.Branch
	if !ControlledBy(run, parent) {
		return fmt.Sprintf("the run is not controlled by its parent %s", parent.Name)
	}
	index, listed := ListedBranch(&parent.Status, run.Name)
	switch {
	case !listed:
		return fmt.Sprintf("the parent %s does not list the run among its branches", parent.Name)
	case parent.Status.Branches[index].UID != "" && parent.Status.Branches[index].UID != string(run.UID):
		return fmt.Sprintf("the parent %s lists another run (uid %s) as its branch %d", parent.Name, parent.Status.Branches[index].UID, index+1)
	case int32(index+1) != b.Index || parent.Status.Branches[index].Agent != b.Agent:
		return fmt.Sprintf("the parent %s lists branch %d to another agent", parent.Name, index+1)
	case parent.Status.Branches[index].InputDigest != InputDigest(run.Spec.Input):
		return fmt.Sprintf("the run's input is not the one the parent %s gave branch %d", parent.Name, index+1)
	case parent.Spec.Approvals != run.Spec.Approvals:
		return fmt.Sprintf("the run's approvals are not its parent's (%s)", parent.Spec.Approvals)
	case b.Depth != Depth(parent)+1:
		return fmt.Sprintf("the run's depth is not its parent's plus one (%d)", Depth(parent)+1)
	}
	shares := Shares(parentPlan, &parent.Status)
	if index >= len(shares) || run.Spec.Limits == nil || !equality.Semantic.DeepEqual(shares[index], *run.Spec.Limits) {
		return fmt.Sprintf("the run's limits are not its share of its parent %s's", parent.Name)
	}
	return ""
}

// Depth is how deep a run is nested as a branch: 0 for a run that is no branch.
func Depth(run *v1alpha1.AgentRun) int32 {
	if run.Spec.Branch == nil {
		return 0
	}
	return run.Spec.Branch.Depth
}
