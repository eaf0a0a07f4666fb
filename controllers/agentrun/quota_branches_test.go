package agentrun

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// A branch takes no place of its own in maxRunningRuns: its parent's place covers it. With two
// places, a run at work whose three branches run too leaves one for the next run.
func TestABranchTakesNoPlaceInMaxRunningRuns(t *testing.T) {
	p := fanOutPlan(t)
	parent, whole := fanOut(t, p)
	quota := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](2)}}
	quota.Name, quota.Namespace = "team", ns
	objs := []client.Object{parent, quota}
	for i, uid := range []types.UID{"uid-b1", "uid-b2"} {
		b := branchRunOf(parent, whole, i+1, uid, operatorUser)
		b.Status.Phase = v1alpha1.PhaseRunning
		objs = append(objs, b)
	}
	deeper := branchRunOf(parent, whole, 1, "uid-b3", operatorUser)
	deeper.Name, deeper.Status.Phase = "r-b1-1-b1-1", v1alpha1.PhaseAwaitingApproval
	objs = append(objs, deeper)
	c := newCluster(t, objs...)
	r := reconciler(t, c, parent, true, 0)
	next := MakeRun("next", ns).Config("research").Obj()
	v, err := r.admit(context.Background(), next, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Admit {
		t.Fatalf("the next run is held (%s: %s); want it admitted to the place the branches do not take", v.Reason, v.Message)
	}
	v, err = r.admit(context.Background(), MakeRun("after", ns).Config("research").Obj(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Admit {
		t.Fatal("a third run was admitted to two places")
	}
}
