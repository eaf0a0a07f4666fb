package agentrun

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/kueue"
	. "github.com/baton-dev/baton/test/builders"
)

// A namespace whose quota sends its runs through Kueue: a run waits Queued for its Workload's
// admission, starts once Kueue admits it, and stops, Evicted, when Kueue takes the admission
// back, with no step after.
func TestARunKueueAdmitsStartsAndStopsWhenEvicted(t *testing.T) {
	o, queued := queuedForKueue(t)
	if !waitsFor(queued, v1alpha1.ConditionProgressing, v1alpha1.ReasonAwaitingAdmission) || queued.Status.Kueue == nil {
		t.Fatalf("before Kueue admits it the run is %s, status.kueue %+v", queued.Status.Phase, queued.Status.Kueue)
	}
	if queued.Status.StepCount != 0 {
		t.Fatalf("a run Kueue has not admitted took %d steps", queued.Status.StepCount)
	}
	o.setWorkload(t, queued, kueuev1beta2.WorkloadAdmitted)
	waiting := o.drive(t, "r", func(r *v1alpha1.AgentRun) bool { return r.Status.Phase == v1alpha1.PhaseAwaitingApproval })
	if k := waiting.Status.Kueue; k == nil || !k.Admitted || k.Queue != "team-queue" {
		t.Errorf("an admitted run's status.kueue is %+v", k)
	}
	o.setWorkload(t, waiting, kueuev1beta2.WorkloadEvicted)
	got := o.drive(t, "r", ended).Status
	if got.TerminationReason != v1alpha1.ReasonEvicted || got.StepCount != 1 {
		t.Errorf("an evicted run ended %s after %d steps (%s); want Evicted after 1", got.TerminationReason, got.StepCount, got.TerminationMessage)
	}
}

// queuedForKueue is an operator of a namespace whose quota sends its runs through Kueue, and its
// run r, Queued for its Workload's admission.
func queuedForKueue(t *testing.T) (*operator, *v1alpha1.AgentRun) {
	t.Helper()
	q := &v1alpha1.AgentQuota{ObjectMeta: metav1.ObjectMeta{Name: "kueue", Namespace: ns},
		Spec: v1alpha1.AgentQuotaSpec{Admission: v1alpha1.AdmissionKueue, DefaultQueue: ptr.To("team-queue")}}
	run := MakeRun("r", ns).Config("gated").Input("go").Obj()
	run.UID = types.UID("uid-r")
	o := newOperator(t, gated(), q, run)
	o.r.Kueue = true
	queued := o.drive(t, "r", func(r *v1alpha1.AgentRun) bool { return r.Status.Phase == v1alpha1.PhaseQueued })
	return o, queued
}

// setWorkload sets condition typ on the run's Workload, as Kueue does.
func (o *operator) setWorkload(t *testing.T, run *v1alpha1.AgentRun, typ string) {
	t.Helper()
	wl := &kueuev1beta2.Workload{}
	if err := o.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: kueue.WorkloadName(run)}, wl); err != nil {
		t.Fatalf("the run's Workload: %v", err)
	}
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", Message: "by the test"})
	if err := o.Update(context.Background(), wl); err != nil {
		t.Fatal(err)
	}
}

// Kueue's admission is written with the run's start: the status the run was read with, which
// the start's write patches against, still says the run was not admitted.
func TestKueueAdmissionLeavesTheStatusReadAlone(t *testing.T) {
	o, queued := queuedForKueue(t)
	o.setWorkload(t, queued, kueuev1beta2.WorkloadAdmitted)

	read := o.run(t, "r")
	stored := read.Status // shares its pointers, as a reconcile's copy does
	v, err := o.r.kueueAdmit(context.Background(), read)
	if err != nil || !v.Admit {
		t.Fatalf("an admitted Workload's run: %+v, %v", v, err)
	}
	if k := read.Status.Kueue; k == nil || !k.Admitted {
		t.Errorf("the run's status.kueue after admission is %+v", k)
	}
	if stored.Kueue == nil || stored.Kueue.Admitted {
		t.Errorf("the status the run was read with changed: status.kueue %+v", stored.Kueue)
	}
}
