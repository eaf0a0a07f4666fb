package sessions

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func session(mod func(*v1alpha1.AgentSession)) *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "ticket-1", Generation: 1},
		Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "helpdesk"}}}
	if mod != nil {
		mod(s)
	}
	return s
}

func ended(name string, n int64, phase v1alpha1.RunPhase, at time.Duration, tokens int64, cost string) Turn {
	return Turn{Name: name, Number: n, Created: t0, Phase: phase, Ended: t0.Add(at), Tokens: tokens, Cost: decimal.RequireFromString(cost), Started: true}
}

func running(name string, n int64) Turn {
	return Turn{Name: name, Number: n, Created: t0, Phase: v1alpha1.PhaseRunning, Cost: decimal.Zero, Started: true}
}

func TestNext(t *testing.T) {
	for name, tc := range map[string]struct {
		facts  Facts
		check  func(t *testing.T, d Decision)
		phase  v1alpha1.SessionPhase
		reason string
	}{
		"a session with no turns is Idle and takes turns": {
			facts: Facts{Session: session(nil)},
			phase: v1alpha1.SessionIdle,
			check: func(t *testing.T, d Decision) {
				if !meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionReady) || d.Status.Turns != 0 {
					t.Errorf("status %+v", d.Status)
				}
			},
		},
		"turns are counted in their order, whatever order they are listed in": {
			facts: Facts{Session: session(nil), Turns: []Turn{
				running("ticket-1-t3", 3),
				ended("ticket-1-t1", 1, v1alpha1.PhaseSucceeded, time.Minute, 100, "0.01"),
				ended("ticket-1-t2", 2, v1alpha1.PhaseFailed, 2*time.Minute, 50, "0.005"),
			}},
			phase: v1alpha1.SessionActive,
			check: func(t *testing.T, d Decision) {
				st := d.Status
				if st.Turns != 3 || st.LastRun != "ticket-1-t3" || st.TokensUsed != 150 || st.Cost != "0.015" || st.IdleSince != nil {
					t.Errorf("status %+v", st)
				}
				if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReconciling) {
					t.Error("a session with a turn at work is not Reconciling")
				}
			},
		},
		"a session whose turns all ended is idle since the last of them ended": {
			facts: Facts{Session: session(nil), Turns: []Turn{
				ended("b", 2, v1alpha1.PhaseSucceeded, time.Minute, 0, "0"),
				ended("a", 1, v1alpha1.PhaseSucceeded, 5*time.Minute, 0, "0"),
			}},
			phase: v1alpha1.SessionIdle,
			check: func(t *testing.T, d Decision) {
				if d.Status.IdleSince == nil || !d.Status.IdleSince.Time.Equal(t0.Add(5*time.Minute)) || d.Status.LastRun != "b" {
					t.Errorf("status %+v", d.Status)
				}
			},
		},
		"the end annotation ends it, the turn at work aside": {
			facts: Facts{Session: session(func(s *v1alpha1.AgentSession) {
				s.Annotations = map[string]string{v1alpha1.AnnotationEnd: "the customer left"}
			}), Turns: []Turn{running("a", 1)}},
			phase: v1alpha1.SessionEnded, reason: v1alpha1.SessionReasonEnded,
			check: func(t *testing.T, d Decision) {
				if !d.Ended || d.Status.EndMessage != "the customer left" || d.Status.EndTime == nil {
					t.Errorf("decision %+v", d)
				}
				if meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionStalled) {
					t.Error("a session ended by hand is not Stalled")
				}
			},
		},
		"an ended session stays ended, its annotation gone": {
			facts: Facts{Session: session(func(s *v1alpha1.AgentSession) {
				s.Status.Phase, s.Status.EndReason = v1alpha1.SessionEnded, v1alpha1.SessionReasonEnded
			})},
			phase: v1alpha1.SessionEnded, reason: v1alpha1.SessionReasonEnded,
			check: func(t *testing.T, d Decision) {
				if d.Ended {
					t.Error("ended again")
				}
			},
		},
		"the tokens of its turns end it at maxTokens": {
			facts: Facts{Session: session(nil), Limits: v1alpha1.SessionLimits{MaxTokens: ptr.To[int64](150)},
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 100, "0"), ended("b", 2, v1alpha1.PhaseFailed, 0, 60, "0")}},
			phase: v1alpha1.SessionEnded, reason: string(v1alpha1.ReasonTokenBudgetExceeded),
			check: func(t *testing.T, d Decision) {
				if !meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionStalled) ||
					d.Status.EndMessage != "the session's turns used 160 tokens of 150" {
					t.Errorf("status %+v", d.Status)
				}
			},
		},
		"their cost ends it at maxCost": {
			facts: Facts{Session: session(nil), Limits: v1alpha1.SessionLimits{MaxCost: ptr.To("0.02")},
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0.015"), ended("b", 2, v1alpha1.PhaseSucceeded, 0, 0, "0.005")}},
			phase: v1alpha1.SessionEnded, reason: string(v1alpha1.ReasonCostBudgetExceeded),
		},
		"a maxCost of 0 takes turns that cost nothing": {
			facts: Facts{Session: session(nil), Limits: v1alpha1.SessionLimits{MaxCost: ptr.To("0")},
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 10, "0")}},
			phase: v1alpha1.SessionIdle,
		},
		"a turn that ended with no completion time does not make the session idle since long ago": {
			facts: Facts{Now: t0, Session: session(func(s *v1alpha1.AgentSession) { s.Spec.TTLSecondsAfterIdle = ptr.To[int32](60) }),
				Turns: []Turn{{Name: "a", Number: 1, Phase: v1alpha1.PhaseCancelled, Cost: decimal.Zero}}},
			phase: v1alpha1.SessionIdle,
			check: func(t *testing.T, d Decision) {
				if d.Delete || d.Status.IdleSince != nil {
					t.Errorf("delete %v, idle since %v", d.Delete, d.Status.IdleSince)
				}
			},
		},
		"the turn at work is the one named, not the last one created": {
			facts: Facts{Session: session(nil), Turns: []Turn{running("t2", 2), {Name: "t3", Number: 3, Phase: v1alpha1.PhaseQueued, Cost: decimal.Zero}}},
			phase: v1alpha1.SessionActive,
			check: func(t *testing.T, d Decision) {
				if c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Message != "turn t2 is at work" {
					t.Errorf("Reconciling %+v", c)
				}
			},
		},
		"maxTurns waits for the last turn to end": {
			facts: Facts{Session: session(nil), Limits: v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)},
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"), running("b", 2)}},
			phase: v1alpha1.SessionActive,
		},
		"a turn waiting past maxTurns does not keep the session open": {
			facts: Facts{Session: session(nil), Limits: v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)},
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"), ended("b", 2, v1alpha1.PhaseSucceeded, 0, 0, "0"),
					{Name: "c", Number: 3, Phase: v1alpha1.PhaseQueued, Cost: decimal.Zero}}},
			phase: v1alpha1.SessionEnded, reason: v1alpha1.SessionReasonMaxTurns,
		},
		"maxTurns ends it once the last turn ended": {
			facts: Facts{Session: session(nil), Limits: v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](2)},
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"), ended("b", 2, v1alpha1.PhaseSucceeded, 0, 0, "0")}},
			phase: v1alpha1.SessionEnded, reason: v1alpha1.SessionReasonMaxTurns,
		},
		"a StateMachine session goes on where its last turn led": {
			facts: Facts{Session: session(nil), StateMachine: true, Turns: []Turn{
				{Name: "a", Number: 1, Phase: v1alpha1.PhaseSucceeded, State: "CONFIRM", Ended: t0},
			}},
			phase: v1alpha1.SessionIdle,
			check: wantState("CONFIRM"),
		},
		"after a failed turn it starts at the first state": {
			facts: Facts{Session: session(nil), StateMachine: true, Turns: []Turn{
				{Name: "a", Number: 1, Phase: v1alpha1.PhaseSucceeded, State: "CONFIRM", Ended: t0},
				{Name: "b", Number: 2, Phase: v1alpha1.PhaseFailed, State: "FIX", Ended: t0},
			}},
			phase: v1alpha1.SessionIdle,
			check: wantState(""),
		},
		"another team keeps no state": {
			facts: Facts{Session: session(nil), Turns: []Turn{
				{Name: "a", Number: 1, Phase: v1alpha1.PhaseSucceeded, State: "writer", Ended: t0},
			}},
			phase: v1alpha1.SessionIdle,
			check: wantState(""),
		},
		"an idle session waits out its time to live": {
			facts: Facts{Now: t0.Add(time.Minute), Session: session(func(s *v1alpha1.AgentSession) { s.Spec.TTLSecondsAfterIdle = ptr.To[int32](3600) }),
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0")}},
			phase: v1alpha1.SessionIdle,
			check: func(t *testing.T, d Decision) {
				if d.Delete || d.After != 59*time.Minute {
					t.Errorf("delete %v after %s, want a look in 59m", d.Delete, d.After)
				}
			},
		},
		"an idle session past its time to live goes": {
			facts: Facts{Now: t0.Add(2 * time.Hour), Session: session(func(s *v1alpha1.AgentSession) { s.Spec.TTLSecondsAfterIdle = ptr.To[int32](3600) }),
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0")}},
			phase: v1alpha1.SessionIdle,
			check: func(t *testing.T, d Decision) {
				if !d.Delete {
					t.Error("not deleted")
				}
			},
		},
		"a session with a turn at work never expires": {
			facts: Facts{Now: t0.Add(2 * time.Hour), Session: session(func(s *v1alpha1.AgentSession) { s.Spec.TTLSecondsAfterIdle = ptr.To[int32](1) }),
				Turns: []Turn{ended("a", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"), running("b", 2)}},
			phase: v1alpha1.SessionActive,
			check: func(t *testing.T, d Decision) {
				if d.Delete || d.After != 0 {
					t.Errorf("delete %v after %s", d.Delete, d.After)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.facts.Now.IsZero() {
				tc.facts.Now = t0
			}
			d := Next(tc.facts)
			if d.Status.Phase != tc.phase || d.Status.EndReason != tc.reason {
				t.Fatalf("phase %s (%s: %s), want %s (%s)", d.Status.Phase, d.Status.EndReason, d.Status.EndMessage, tc.phase, tc.reason)
			}
			if d.Status.ObservedGeneration != 1 {
				t.Errorf("observedGeneration %d", d.Status.ObservedGeneration)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

func wantState(state string) func(t *testing.T, d Decision) {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Status.State != state {
			t.Errorf("state %q, want %q", d.Status.State, state)
		}
	}
}

// An ended session never takes turns again, its counts are its turns' whatever their order, and
// a session is idle exactly when no turn is at work.
func TestNextProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		phases := []v1alpha1.RunPhase{v1alpha1.PhaseQueued, v1alpha1.PhaseRunning, v1alpha1.PhaseAwaitingInput,
			v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseCancelled}
		n := rapid.IntRange(0, 12).Draw(t, "turns")
		var turns []Turn
		var tokens int64
		atWork := false
		for i := range n {
			p := rapid.SampledFrom(phases).Draw(t, "phase")
			tk := rapid.Int64Range(0, 1000).Draw(t, "tokens")
			tokens += tk
			atWork = atWork || !p.Terminal()
			turns = append(turns, Turn{Name: string(rune('a' + i)), Number: int64(i + 1), Phase: p, Tokens: tk,
				Cost: decimal.New(rapid.Int64Range(0, 100).Draw(t, "cents"), -2), Ended: t0.Add(time.Duration(i) * time.Second)})
		}
		s := session(nil)
		if rapid.Bool().Draw(t, "limited") {
			s.Spec.Limits = &v1alpha1.SessionLimits{MaxTokens: ptr.To(rapid.Int64Range(1, 5000).Draw(t, "maxTokens"))}
		}
		f := Facts{Now: t0, Session: s, Turns: turns}
		if s.Spec.Limits != nil {
			f.Limits = *s.Spec.Limits
		}
		d := Next(f)
		if d.Status.Turns != int32(n) || d.Status.TokensUsed != tokens {
			t.Fatalf("counts %d turns %d tokens, want %d %d", d.Status.Turns, d.Status.TokensUsed, n, tokens)
		}
		if d.Status.Phase != v1alpha1.SessionEnded && (d.Status.Phase == v1alpha1.SessionIdle) == atWork {
			t.Fatalf("phase %s with a turn at work: %v", d.Status.Phase, atWork)
		}
		if f.Limits.MaxTokens != nil && tokens >= *f.Limits.MaxTokens && d.Status.Phase != v1alpha1.SessionEnded {
			t.Fatalf("used %d of %d tokens and not ended", tokens, *f.Limits.MaxTokens)
		}
		// Reversed, the turns give the same status; once ended, it stays ended.
		slicesReverse(f.Turns)
		again := f
		s2 := s.DeepCopy()
		s2.Status = d.Status
		again.Session = s2
		d2 := Next(again)
		if d2.Status.Turns != d.Status.Turns || d2.Status.LastRun != d.Status.LastRun || d2.Status.Phase != d.Status.Phase {
			t.Fatalf("listed in another order: %+v, then %+v", d.Status, d2.Status)
		}
		if d2.Ended {
			t.Fatal("a session ended twice")
		}
	})
}

func slicesReverse(ts []Turn) {
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
}

// A session is tainted by the first of its turns that was, and stays so when that turn goes; a
// turn starts with the taint of the turns before it only.
func TestASessionsTaintIsItsFirstTaintedTurnsAndStays(t *testing.T) {
	web := &v1alpha1.Taint{Source: "tool web/fetch", Step: 2}
	a, b, c := ended("a", 1, v1alpha1.PhaseSucceeded, time.Minute, 10, "0"), ended("b", 2, v1alpha1.PhaseSucceeded, 2*time.Minute, 10, "0"), running("c", 3)
	b.Taint = web
	c.Taint = &v1alpha1.Taint{Source: "input"}
	d := Next(Facts{Now: t0.Add(3 * time.Minute), Session: session(nil), Turns: []Turn{c, b, a}})
	if got := d.Status.Taint; got == nil || got.Source != "turn b: tool web/fetch" || got.Step != 0 {
		t.Fatalf("the session's taint is %+v; want turn b's", got)
	}
	gone := session(func(s *v1alpha1.AgentSession) { s.Status = d.Status })
	if got := Next(Facts{Now: t0.Add(4 * time.Minute), Session: gone, Turns: []Turn{a}}).Status.Taint; got == nil || got.Source != "turn b: tool web/fetch" {
		t.Errorf("with turn b deleted the session's taint is %+v", got)
	}
	if got := TaintOf(&v1alpha1.AgentSessionStatus{}, []Turn{a, b, c}, &a); got != nil {
		t.Errorf("turn a starts with taint %+v, from turns after it", got)
	}
	if got := TaintOf(&v1alpha1.AgentSessionStatus{}, []Turn{a, b, c}, &c); got == nil || got.Source != "turn b: tool web/fetch" {
		t.Errorf("turn c starts with taint %+v; want turn b's", got)
	}
}
