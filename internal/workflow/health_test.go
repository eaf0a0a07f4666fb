package workflow

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// TestConditionsFollowThePhase checks the conditions kstatus reads in each phase a run goes
// through: Reconciling while it can change, Stalled once it failed or was cancelled, Ready once
// it succeeded, each with the phase or the termination reason.
func TestConditionsFollowThePhase(t *testing.T) {
	p := gatedPlan(t, pipeline())
	running := started(p)
	gated := atPlanGate(t, p)
	ungated := MakeConfig("pipeline", "ns").Agents(MakeAgent("planner").HandsOffTo("reporter"), MakeAgent("reporter").Terminator())
	succeeded := drive(t, mustPlan(t, ungated), turn{Output: "plan", Handoff: "reporter"}, turn{Output: "report"})
	failed := Fail(running, v1alpha1.ReasonConfigInvalid, "the pinned config is gone", t0).Status
	cancelled := Cancel(gated, "not needed", t0).Status

	type cond struct{ Status, Reason string }
	cases := map[string]struct {
		status v1alpha1.AgentRunStatus
		want   map[string]cond
	}{
		"running": {running, map[string]cond{
			"Progressing": {"True", "Running"}, "Reconciling": {"True", "Running"}, "Ready": {"False", "Running"}}},
		"waiting at a gate": {gated, map[string]cond{
			"Progressing": {"True", "AwaitingApproval"}, "Reconciling": {"True", "AwaitingApproval"}, "Ready": {"False", "AwaitingApproval"}}},
		"succeeded": {succeeded, map[string]cond{
			"Progressing": {"False", "Completed"}, "Ready": {"True", "Completed"}}},
		"failed": {failed, map[string]cond{
			"Progressing": {"False", "ConfigInvalid"}, "Ready": {"False", "ConfigInvalid"}, "Stalled": {"True", "ConfigInvalid"}}},
		"cancelled": {cancelled, map[string]cond{
			"Progressing": {"False", "Cancelled"}, "Ready": {"False", "Cancelled"}, "Stalled": {"True", "Cancelled"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]cond{}
			for _, c := range tc.status.Conditions {
				switch c.Type {
				case v1alpha1.ConditionProgressing, v1alpha1.ConditionReconciling, v1alpha1.ConditionReady, v1alpha1.ConditionStalled:
					got[c.Type] = cond{string(c.Status), c.Reason}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserveMarksEveryCondition checks that the status and each of its conditions carry the
// generation the operator saw.
func TestObserveMarksEveryCondition(t *testing.T) {
	st := started(mustPlan(t, pipeline()))
	Observe(&st, 3)
	if st.ObservedGeneration != 3 || len(st.Conditions) == 0 {
		t.Fatalf("observedGeneration %d with %d conditions", st.ObservedGeneration, len(st.Conditions))
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 3 {
			t.Fatalf("condition %s observed generation %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
}
