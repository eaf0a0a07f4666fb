package workflow

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TestStartGate is the order a Pending run's start waits in: the first reason wins, and the
// run's quotas and Kueue are asked only once nothing else holds it.
func TestStartGate(t *testing.T) {
	session := func(mod func(*SessionFacts)) *SessionFacts {
		s := &SessionFacts{Name: "ticket-1", Found: true}
		if mod != nil {
			mod(s)
		}
		return s
	}
	for name, tc := range map[string]struct {
		facts   StartFacts
		want    StartWait
		phase   v1alpha1.RunPhase
		reason  string // the termination reason, or the condition's reason of a waiting run
		message string
	}{
		"a run whose config exists, can run and has its Secrets goes on": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true},
			want:  StartGo,
		},
		"a config that cannot run ends the run, whatever else holds it": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, Invalid: "AgentConfig helpdesk cannot run: no agents",
				MissingSecret: "agent a needs its API key", Session: session(func(s *SessionFacts) { s.Before = "ticket-1-t1" })},
			want: StartEnds, phase: v1alpha1.PhaseFailed, reason: string(v1alpha1.ReasonConfigInvalid), message: "no agents",
		},
		"a missing config keeps the run Pending before its session is looked at": {
			facts: StartFacts{Config: "helpdesk", Session: session(func(s *SessionFacts) { s.Found = false })},
			want:  StartWaitsForConfig, phase: v1alpha1.PhasePending, reason: v1alpha1.ReasonConfigNotFound, message: "AgentConfig helpdesk does not exist",
		},
		"a turn whose session does not exist waits Pending for it": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, Session: session(func(s *SessionFacts) { s.Found = false })},
			want:  StartWaitsForSession, phase: v1alpha1.PhasePending, reason: v1alpha1.ReasonSessionNotFound, message: "AgentSession ticket-1 does not exist",
		},
		"a turn created after its session ended fails SessionEnded": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, Session: session(func(s *SessionFacts) {
				s.EndReason, s.EndMessage, s.EndedBefore = "Ended", "the customer left", true
			})},
			want: StartEnds, phase: v1alpha1.PhaseFailed, reason: string(v1alpha1.ReasonSessionEnded),
			message: "session ticket-1 ended (Ended) before this turn was created: the customer left",
		},
		"a turn waiting when its session ends is cancelled": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, Session: session(func(s *SessionFacts) {
				s.EndReason, s.Before = "MaxTurnsExceeded", "ticket-1-t1"
			})},
			want: StartEnds, phase: v1alpha1.PhaseCancelled, reason: string(v1alpha1.ReasonCancelled),
			message: "session ticket-1 ended (MaxTurnsExceeded) while this turn waited",
		},
		"a turn whose session's turns before it used its limits up fails SessionEnded": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, Session: session(func(s *SessionFacts) {
				s.Spent = "its turns before this one took all of limits.maxTurns (2)"
			})},
			want: StartEnds, phase: v1alpha1.PhaseFailed, reason: string(v1alpha1.ReasonSessionEnded),
			message: "session ticket-1: its turns before this one took all of limits.maxTurns (2)",
		},
		"a turn waits Queued for the turn before it, not for a Secret": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, MissingSecret: "agent a needs its API key",
				Session: session(func(s *SessionFacts) { s.Before = "ticket-1-t2" })},
			want: StartWaitsForSession, phase: v1alpha1.PhaseQueued, reason: v1alpha1.ReasonSessionBusy,
			message: "session ticket-1: waits for turn ticket-1-t2 to end",
		},
		"a turn that is next goes on": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, Session: session(nil)},
			want:  StartGo,
		},
		"a run waits Pending for a Secret its agents need": {
			facts: StartFacts{Config: "helpdesk", ConfigFound: true, MissingSecret: "agent a needs its API key"},
			want:  StartWaitsForSecret, phase: v1alpha1.PhasePending, reason: v1alpha1.ReasonSecretNotFound, message: "agent a needs its API key",
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.facts.Now = t0
			d, wait := StartGate(tc.facts)
			if wait != tc.want {
				t.Fatalf("wait %v, want %v", wait, tc.want)
			}
			if wait == StartGo {
				return
			}
			st := d.Status
			if st.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", st.Phase, tc.phase)
			}
			reason, message := string(st.TerminationReason), st.TerminationMessage
			if !st.Phase.Terminal() {
				c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
				if st.Phase == v1alpha1.PhasePending {
					c = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConfigResolved)
				}
				if c == nil {
					t.Fatalf("no condition says why the run waits: %+v", st.Conditions)
				}
				reason, message = c.Reason, c.Message
			}
			if reason != tc.reason || !strings.Contains(message, tc.message) {
				t.Errorf("reason %s %q, want %s containing %q", reason, message, tc.reason, tc.message)
			}
		})
	}
}

// TestATurnStartsWhereTheLastOneLed: a StateMachine session's turn starts in the state the turn
// before it led to, unless that state is final or gone; other teams start at their entrypoint.
func TestATurnStartsWhereTheLastOneLed(t *testing.T) {
	machine := mustPlan(t, triage())
	for name, tc := range map[string]struct {
		plan        *Plan
		state       string
		wantState   string
		wantRunning bool
	}{
		"a state with an agent":           {plan: machine, state: "ESCALATE", wantState: "ESCALATE", wantRunning: true},
		"no state: the first state":       {plan: machine, state: "", wantState: "CHECK", wantRunning: true},
		"a state no longer in the config": {plan: machine, state: "GONE", wantState: "CHECK", wantRunning: true},
		"a final state: the first state":  {plan: machine, state: "DONE", wantState: "CHECK", wantRunning: true},
		"a Swarm team: its entrypoint":    {plan: mustPlan(t, team()), state: "worker", wantState: "lead", wantRunning: true},
	} {
		t.Run(name, func(t *testing.T) {
			d := StartTurn(tc.plan, v1alpha1.AgentRunStatus{}, "and now?", "r-1", tc.state, t0)
			if d.Status.State != tc.wantState || (d.Status.Phase == v1alpha1.PhaseRunning) != tc.wantRunning {
				t.Errorf("started in %q (%s), want %q", d.Status.State, d.Status.Phase, tc.wantState)
			}
		})
	}
}
