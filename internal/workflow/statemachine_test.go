package workflow

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	. "github.com/baton-dev/baton/test/builders"
)

// triage is a small StateMachine: check, then fix or escalate, then done.
func triage() *ConfigWrapper {
	return MakeConfig("triage", "ns").Mode(v1alpha1.ModeStateMachine).Agents(
		MakeAgent("checker"), MakeAgent("fixer"), MakeAgent("human-desk"),
	).Signal("KNOWN", v1alpha1.ActionNone).Signal("UNKNOWN", v1alpha1.ActionNone).Signal("FIXED", v1alpha1.ActionNone).
		State("CHECK", "checker", map[string]string{"KNOWN": "FIX", "UNKNOWN": "ESCALATE"}).
		State("FIX", "fixer", map[string]string{"FIXED": "DONE"}).
		State("ESCALATE", "human-desk", map[string]string{"FIXED": "DONE"}).
		State("DONE", "", nil)
}

func TestStateMachineRoutesOnSignals(t *testing.T) {
	p := mustPlan(t, triage())
	st := started(p)
	if st.State != "CHECK" || st.CurrentAgent != "checker" {
		t.Fatalf("start: state %s agent %s", st.State, st.CurrentAgent)
	}
	st = drive(t, p, turn{Output: "Seen it before.\nKNOWN"}, turn{Output: "Applied the fix", Signal: "FIXED"})
	if st.Phase != v1alpha1.PhaseSucceeded || st.TerminationReason != v1alpha1.ReasonCompleted {
		t.Fatalf("want Completed, got %s: %s", st.TerminationReason, st.TerminationMessage)
	}
	if st.TerminationMessage != "reached final state DONE on FIXED from FIX at step 2" {
		t.Fatalf("message %q", st.TerminationMessage)
	}
	if st.State != "DONE" {
		t.Fatalf("a run that reached final state DONE shows state %s", st.State)
	}
	var reasons []string
	for _, r := range st.HandoffSequence {
		reasons = append(reasons, r.From+" "+r.Reason)
	}
	if diff := cmp.Diff([]string{"checker KNOWN: CHECK -> FIX", "fixer FIXED: FIX -> DONE"}, reasons); diff != "" {
		t.Fatalf("sequence (-want +got):\n%s", diff)
	}
}

func TestStateMachineFailedSteps(t *testing.T) {
	cases := map[string]struct {
		config  *ConfigWrapper
		answer  turn
		state   string
		agent   string
		reason  v1alpha1.TerminationReason
		message string
	}{
		"no signal and no onError ends the run": {
			config:  triage(),
			answer:  turn{Output: "hmm"},
			reason:  v1alpha1.ReasonTooManyErrors,
			message: "checker failed with no agent to recover (state CHECK: checker emitted no signal; expected one of KNOWN, UNKNOWN) at step 1",
		},
		"a signal without a transition goes to onError": {
			config: func() *ConfigWrapper {
				c := triage()
				c.Spec.States[0].OnError = "ESCALATE"
				return c
			}(),
			answer: turn{Output: "done already", Signal: "FIXED"},
			state:  "ESCALATE",
			agent:  "human-desk",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := drive(t, mustPlan(t, tc.config), tc.answer)
			if st.ErrorCount != 1 || st.HandoffSequence[0].Outcome != v1alpha1.OutcomeFailed {
				t.Fatalf("want one failed step, got errors %d, %+v", st.ErrorCount, st.HandoffSequence[0])
			}
			if st.TerminationReason != tc.reason || st.State != firstNonEmpty(tc.state, st.State) || (tc.agent != "" && st.CurrentAgent != tc.agent) {
				t.Fatalf("got reason %q state %s agent %s (%s)", st.TerminationReason, st.State, st.CurrentAgent, st.TerminationMessage)
			}
			if tc.message != "" && st.TerminationMessage != tc.message {
				t.Fatalf("message %q", st.TerminationMessage)
			}
		})
	}
}

func TestStateMachineTerminateNeedsATerminator(t *testing.T) {
	c := triage().Signal("STOP", v1alpha1.ActionTerminate)
	c.Spec.States[0].Transitions["STOP"] = "DONE"
	d := Apply(mustPlan(t, c), started(mustPlan(t, c)), StepResult{Agent: "checker", Result: turn{Output: "STOP"}}, t0)
	if d.Status.TerminationReason != v1alpha1.ReasonCompleted || !cmp.Equal(eventReasons(d), []string{EventTerminateIgnored}) {
		t.Fatalf("a non-terminator's Terminate must be ignored and the transition taken: %s %v", d.Status.TerminationReason, eventReasons(d))
	}
	c.Spec.Agents[0].Terminator = true
	d = Apply(mustPlan(t, c), started(mustPlan(t, c)), StepResult{Agent: "checker", Result: turn{Output: "STOP"}}, t0)
	if d.Status.TerminationReason != v1alpha1.ReasonTerminated {
		t.Fatalf("a terminator's Terminate ends the run Terminated, got %s", d.Status.TerminationReason)
	}
}

// TestStateMachineShowsTheFinalStateOnlyOnceReached checks that a run whose final state waits
// behind the before-Complete gate shows the state it waits in, and the final state once the gate
// lets it complete; a rejection leaves the final state unreached.
func TestStateMachineShowsTheFinalStateOnlyOnceReached(t *testing.T) {
	p := gatedPlan(t, triage().Gate("final", "Complete", 1))
	st := drive(t, p, turn{Output: "KNOWN", Signal: "KNOWN"}, turn{Output: "Applied the fix", Signal: "FIXED"})
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.State != "FIX" {
		t.Fatalf("at the final gate: phase %s state %s, want AwaitingApproval in FIX", st.Phase, st.State)
	}
	approved := Decide(p, st, decision(1, decisions.Approve, "final", "alice"), t0).Status
	if approved.TerminationReason != v1alpha1.ReasonCompleted || approved.State != "DONE" {
		t.Fatalf("approved: %s in state %s, want Completed in DONE", approved.TerminationReason, approved.State)
	}
	rejected := Decide(p, st, decision(1, decisions.Reject, "final", "alice"), t0).Status
	if rejected.TerminationReason != v1alpha1.ReasonRejected || rejected.State != "FIX" {
		t.Fatalf("rejected: %s in state %s, want Rejected in FIX", rejected.TerminationReason, rejected.State)
	}
}

// TestStateMachineEndsInTheStateItsLastSignalLeadsTo checks that a terminator's Terminate
// signal, which ends the run before any transition is taken, still shows the state its
// transition leads to, as the helpdesk sample's TERMINATE_WORKFLOW -> TERMINATED does.
func TestStateMachineEndsInTheStateItsLastSignalLeadsTo(t *testing.T) {
	c := MakeConfig("helpdesk", "ns").Mode(v1alpha1.ModeStateMachine).Agents(
		MakeAgent("ticketing").Terminator(),
	).Signal("TERMINATE_WORKFLOW", v1alpha1.ActionTerminate).
		State("FINAL_UPDATE_PENDING", "ticketing", map[string]string{"TERMINATE_WORKFLOW": "TERMINATED"}).
		State("TERMINATED", "", nil)
	st := drive(t, mustPlan(t, c), turn{Output: "closed", Signal: "TERMINATE_WORKFLOW"})
	if st.TerminationReason != v1alpha1.ReasonTerminated || st.State != "TERMINATED" {
		t.Fatalf("ended %s in state %s, want Terminated in TERMINATED", st.TerminationReason, st.State)
	}
}
