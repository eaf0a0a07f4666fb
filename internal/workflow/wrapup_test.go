package workflow

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// wrapTeam is team() whose closer wraps up when a limit runs out.
func wrapTeam() *ConfigWrapper { return team().WrapUp("closer") }

// handoff is lead's or worker's step that hands control to the other.
func handoff(st v1alpha1.AgentRunStatus) StepResult {
	to := "worker"
	if st.CurrentAgent == "worker" {
		to = "lead"
	}
	return StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: Result{Output: "more from " + st.CurrentAgent, Handoff: to, Tokens: 10}}
}

func TestALimitThatRunsOutGivesTheWrapUpAgentTheLastTurn(t *testing.T) {
	p := mustPlan(t, wrapTeam().MaxSteps(3))
	st := started(p)
	var d Update
	for st.StepCount < 3 {
		d = Apply(p, st, handoff(st), t0)
		st = d.Status
	}
	if st.Phase != v1alpha1.PhaseRunning || st.CurrentAgent != "closer" || st.WrappingUp == nil {
		t.Fatalf("after the step limit: phase %s, agent %s, wrappingUp %v; want Running, closer, set", st.Phase, st.CurrentAgent, st.WrappingUp)
	}
	if st.WrappingUp.Limit != v1alpha1.ReasonMaxStepsExceeded || !strings.Contains(st.WrappingUp.Message, "step limit: 3 of 3") {
		t.Errorf("wrappingUp = %+v, want the step limit with its evidence", st.WrappingUp)
	}
	if d.Guard != string(v1alpha1.ReasonMaxStepsExceeded) {
		t.Errorf("guard = %q, want the step limit counted as a trip", d.Guard)
	}
	if got := eventReasons(d); !contains(got, EventWrappingUp) {
		t.Errorf("events = %v, want %s", got, EventWrappingUp)
	}
	step := Next(p, &st)
	if step.WrapUp == nil || step.Agent != "closer" || !strings.Contains(step.Input, "step limit") {
		t.Fatalf("next step = %+v, want closer's wrap-up turn told of the step limit", step)
	}
	if _, tripped := Check(p, st, t0.Add(time.Hour)); tripped {
		t.Error("guards tripped before the wrap-up turn; the limits already ran out")
	}
	// The closer tries to hand off: the answer ends the run all the same.
	d = Apply(p, st, StepResult{Agent: "closer", Input: step.Input, Result: Result{Output: "the summary", Handoff: "lead", Tokens: 5}}, t0)
	s := d.Status
	if s.Phase != v1alpha1.PhaseSucceeded || s.TerminationReason != v1alpha1.ReasonWrappedUp {
		t.Fatalf("after the wrap-up turn: %s/%s, want Succeeded/WrappedUp", s.Phase, s.TerminationReason)
	}
	if s.Output != "the summary" || s.HandoffCount != st.HandoffCount || s.StepCount != 4 {
		t.Errorf("output %q, handoffs %d->%d, steps %d; want the closer's answer, no handoff, 4 steps", s.Output, st.HandoffCount, s.HandoffCount, s.StepCount)
	}
	if !strings.Contains(s.TerminationMessage, "closer wrapped up") || !strings.Contains(s.TerminationMessage, "step limit: 3 of 3") {
		t.Errorf("termination message %q does not name the wrap-up and the limit", s.TerminationMessage)
	}
}

func TestEachLimitItAnswersForWrapsUp(t *testing.T) {
	cases := map[string]struct {
		config *ConfigWrapper
		// res is lead's first step; now when the guards run after it.
		res  Result
		now  time.Time
		want v1alpha1.TerminationReason
	}{
		"handoffs": {config: wrapTeam().MaxHandoffs(1), res: Result{Output: "x", Handoff: "worker"}, now: t0, want: v1alpha1.ReasonMaxHandoffsExceeded},
		"tokens":   {config: wrapTeam().MaxTokens(100), res: Result{Output: "x", Handoff: "worker", Tokens: 100}, now: t0, want: v1alpha1.ReasonTokenBudgetExceeded},
		"time":     {config: wrapTeam().Timeout(time.Minute), res: Result{Output: "x", Handoff: "worker"}, now: t0.Add(2 * time.Minute), want: v1alpha1.ReasonTimeout},
		"a call the cost budget cannot pay for": {config: wrapTeam().MaxCost("1"),
			res: Result{Trip: &ToolTrip{Reason: v1alpha1.ReasonCostBudgetExceeded, Message: "cost budget: 0.9 of 1 spent"}}, now: t0, want: v1alpha1.ReasonCostBudgetExceeded},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustPlan(t, tc.config)
			st := started(p)
			st = Apply(p, st, StepResult{Agent: "lead", Input: st.Input, Result: tc.res}, tc.now).Status
			if st.WrappingUp == nil && tc.want == v1alpha1.ReasonTimeout {
				d, _ := Check(p, st, tc.now)
				st = d.Status
			}
			if st.Phase != v1alpha1.PhaseRunning || st.WrappingUp == nil || st.WrappingUp.Limit != tc.want || st.CurrentAgent != "closer" {
				t.Fatalf("phase %s, agent %s, wrappingUp %+v; want Running, closer, %s", st.Phase, st.CurrentAgent, st.WrappingUp, tc.want)
			}
		})
	}
}

func TestAFailedWrapUpTurnEndsTheRunForItsLimit(t *testing.T) {
	p := mustPlan(t, wrapTeam().MaxHandoffs(1))
	st := started(p)
	st = Apply(p, st, handoff(st), t0).Status
	d := Apply(p, st, StepResult{Agent: "closer", Input: st.Input, Error: "model unavailable"}, t0)
	s := d.Status
	if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonMaxHandoffsExceeded {
		t.Fatalf("%s/%s, want Failed/MaxHandoffsExceeded", s.Phase, s.TerminationReason)
	}
	if !strings.Contains(s.TerminationMessage, "wrap-up turn of closer failed: model unavailable") {
		t.Errorf("message %q does not say the wrap-up failed and why", s.TerminationMessage)
	}
}

func TestLimitsThatSayARunWentWrongDoNotWrapUp(t *testing.T) {
	p := mustPlan(t, wrapTeam().MaxErrors(1))
	st := started(p)
	s := Apply(p, st, StepResult{Agent: "lead", Input: st.Input, Error: "boom"}, t0).Status
	if s.WrappingUp != nil || s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonTooManyErrors {
		t.Fatalf("%s/%s wrappingUp %v; want Failed/TooManyErrors without a wrap-up", s.Phase, s.TerminationReason, s.WrappingUp)
	}
	// Without limits.wrapUp a limit ends the run as it always did.
	p = mustPlan(t, team().MaxHandoffs(1))
	st = started(p)
	s = Apply(p, st, handoff(st), t0).Status
	if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonMaxHandoffsExceeded {
		t.Fatalf("without wrapUp: %s/%s, want Failed/MaxHandoffsExceeded", s.Phase, s.TerminationReason)
	}
}

func TestAGateAfterTheWrapUpAgentHoldsTheRunsEnd(t *testing.T) {
	p := mustPlan(t, wrapTeam().MaxHandoffs(1).Gate("final", "closer", 1))
	st := started(p)
	st = Apply(p, st, handoff(st), t0).Status
	s := Apply(p, st, StepResult{Agent: "closer", Input: st.Input, Result: Result{Output: "summary"}}, t0).Status
	if s.Phase != v1alpha1.PhaseAwaitingApproval || s.PendingApproval == nil || s.PendingApproval.Completes == nil ||
		s.PendingApproval.Completes.Reason != v1alpha1.ReasonWrappedUp {
		t.Fatalf("phase %s pending %+v; want the gate to hold the WrappedUp end", s.Phase, s.PendingApproval)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
