package webhook

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Only the operator makes branch runs (docs/design/parallel-branches.md). Three marks make a run
// look like a branch of another: spec.branch, the agents.baton.dev/parent label, and a
// controller reference to an AgentRun. A person who could write them on a run of their own would
// have a reader that goes by them take it for a branch of someone else's run: its output, its
// tokens, a cancel meant for the branch. So nobody but the operator may create a run that
// carries any of them, or give one to a run later: the label may not be set, changed or removed,
// nor a controller reference to an AgentRun added or changed. Taking a controller reference
// away is allowed: the garbage collector does that to the branches of a run deleted with
// --cascade=orphan, and a run no longer controlled by its parent is nobody's branch. spec.branch
// comes only with a create: a run's spec is immutable (a CEL rule), and the check of an update
// is there should that rule ever be relaxed.

// branchMarks says why the request may not give the run the marks of a branch, if it may not:
// it is not the operator's, and the run carries a mark it did not have before (old is empty
// on a create).
func (w *Decisions) branchMarks(req admissionv1.AdmissionRequest, run, old *v1alpha1.AgentRun) string {
	if req.UserInfo.Username == w.Self {
		return ""
	}
	create := req.Operation == admissionv1.Create
	var marks []string
	if !equality.Semantic.DeepEqual(run.Spec.Branch, old.Spec.Branch) {
		marks = append(marks, pick(create, "spec.branch", "a change of spec.branch"))
	}
	label, has := run.Labels[v1alpha1.LabelParent]
	was, had := old.Labels[v1alpha1.LabelParent]
	if has != had || label != was {
		marks = append(marks, pick(create, "the label "+v1alpha1.LabelParent, "a change of the label "+v1alpha1.LabelParent))
	}
	if ref := workflow.RunController(run); ref != nil && !sameRef(ref, workflow.RunController(old)) {
		marks = append(marks, pick(create, "a controller reference to an AgentRun", "a new controller reference to an AgentRun"))
	}
	if len(marks) == 0 {
		return ""
	}
	name := run.Name
	if name == "" {
		name = run.GenerateName + "*"
	}
	return fmt.Sprintf("user %q may not %s AgentRun %s/%s with %s: they make a run a branch of another run, and only Baton makes branch runs, for a run's fan-out",
		req.UserInfo.Username, pick(create, "create", "update"), run.Namespace, name, strings.Join(marks, " and "))
}

// sameRef reports whether two owner references name the same owner the same way.
func sameRef(a, b *metav1.OwnerReference) bool {
	return b != nil && a.UID == b.UID && a.Name == b.Name && a.Kind == b.Kind && a.APIVersion == b.APIVersion
}

// pick is onCreate for a create, else onUpdate.
func pick(create bool, onCreate, onUpdate string) string {
	if create {
		return onCreate
	}
	return onUpdate
}
