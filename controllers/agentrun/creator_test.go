package agentrun

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// A branch's creator, for its gates that forbid self-approval, is its root run's; a branch whose
// parent is gone, or is another run now, has none known (its gates then refuse every approval),
// never the operator that created the branch run.
func TestABranchsCreatorIsItsRootRunsOrNobody(t *testing.T) {
	yes := true
	root := MakeRun("root", ns).Config("research").Annotate(v1alpha1.AnnotationCreatedBy, "alice").Obj()
	root.UID = "root-uid"
	branchOf := func(name string, parent *v1alpha1.AgentRun, depth int32) *v1alpha1.AgentRun {
		b := MakeRun(name, ns).Config("research").Annotate(v1alpha1.AnnotationCreatedBy, operatorUser).Obj()
		b.UID = types.UID(name + "-uid")
		b.Spec.Branch = &v1alpha1.RunBranch{Parent: parent.Name, Step: 1, Index: 1, Agent: "researcher", Depth: depth}
		b.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun", Name: parent.Name,
			UID: parent.UID, Controller: &yes}}
		return b
	}
	child := branchOf("root-b1-1", root, 1)
	grandchild := branchOf("root-b1-1-b1-1", child, 2)
	gone := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns, UID: "gone-uid"}}
	orphan := branchOf("gone-b1-1", gone, 1)
	replaced := branchOf("root-b2-1", &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "root", UID: "the-first-root"}}, 1)
	for name, tc := range map[string]struct {
		run     *v1alpha1.AgentRun
		trusted bool
		want    string
	}{
		"a run":                         {run: root, trusted: true, want: "alice"},
		"a branch":                      {run: child, trusted: true, want: "alice"},
		"a branch of a branch":          {run: grandchild, trusted: true, want: "alice"},
		"a branch whose parent is gone": {run: orphan, trusted: true, want: ""},
		"a branch whose parent is another run now": {run: replaced, trusted: true, want: ""},
		"a branch, the webhook not trusted":        {run: child, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, root, child, grandchild, orphan, replaced)
			r := reconciler(t, c, root, tc.trusted, 0)
			if got := r.creatorOf(context.Background(), tc.run); got != tc.want {
				t.Errorf("creator %q; want %q", got, tc.want)
			}
		})
	}
}
