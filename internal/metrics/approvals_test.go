package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TestWaitingApprovalsCountsEachGate checks the gauges of runs waiting at gates: per gate, how
// many wait, how long the oldest has, and how many wait past their gate's timeout.
func TestWaitingApprovalsCountsEachGate(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	waiting := func(name, gate string, waited time.Duration, timeout time.Duration) *v1alpha1.AgentRun {
		r := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
		r.Spec.ConfigRef.Name = "pipeline"
		r.Status.Phase = v1alpha1.PhaseAwaitingApproval
		r.Status.PendingApproval = &v1alpha1.PendingApproval{Gate: gate, Since: metav1.NewMicroTime(now.Add(-waited))}
		if timeout > 0 {
			expires := metav1.NewMicroTime(now.Add(-waited + timeout))
			r.Status.PendingApproval.Expires = &expires
		}
		return r
	}
	running := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: "team"}}
	running.Status.Phase = v1alpha1.PhaseRunning
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&v1alpha1.AgentRun{}, WaitingIndex, WaitingAtGate).WithObjects(
		waiting("a", "plan", 10*time.Minute, time.Hour),
		waiting("b", "plan", 2*time.Hour, time.Hour), // past its timeout
		waiting("c", "final", 30*time.Second, 0),
		running,
	).Build()
	w := newWaitingApprovals()
	w.Use(reader, clocktesting.NewFakePassiveClock(now))
	want := `
# HELP baton_approval_oldest_wait_seconds How long the run that has waited longest at a gate has waited so far, by gate.
# TYPE baton_approval_oldest_wait_seconds gauge
baton_approval_oldest_wait_seconds{config="pipeline",gate="final",namespace="team"} 30
baton_approval_oldest_wait_seconds{config="pipeline",gate="plan",namespace="team"} 7200
# HELP baton_approvals_overdue Runs waiting at a gate past its timeout, whose onTimeout the operator has not applied yet, by gate.
# TYPE baton_approvals_overdue gauge
baton_approvals_overdue{config="pipeline",gate="final",namespace="team"} 0
baton_approvals_overdue{config="pipeline",gate="plan",namespace="team"} 1
# HELP baton_approvals_waiting Runs waiting at a gate now, by gate.
# TYPE baton_approvals_waiting gauge
baton_approvals_waiting{config="pipeline",gate="final",namespace="team"} 1
baton_approvals_waiting{config="pipeline",gate="plan",namespace="team"} 2
`
	if err := testutil.CollectAndCompare(w, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
