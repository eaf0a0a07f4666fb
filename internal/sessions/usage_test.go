package sessions

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func waiting(name string, n int64) Turn {
	return Turn{Name: name, Number: n, Created: t0, Phase: v1alpha1.PhasePending, Cost: decimal.Zero}
}

func TestWaitsFor(t *testing.T) {
	for name, tc := range map[string]struct {
		turn  Turn
		turns []Turn
		want  string
	}{
		"the first turn waits for none": {turn: waiting("t1", 1)},
		"a turn waits for the last unended turn before it": {turn: waiting("t3", 3), want: "t2",
			turns: []Turn{running("t1", 1), waiting("t2", 2), ended("t0", 0, v1alpha1.PhaseSucceeded, 0, 0, "0")}},
		"a turn after ended turns waits for none": {turn: waiting("t3", 3),
			turns: []Turn{ended("t1", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"), ended("t2", 2, v1alpha1.PhaseFailed, 0, 0, "0")}},
		"a turn stored after a later one that started waits for it": {turn: waiting("t2", 2), want: "t3",
			turns: []Turn{ended("t1", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"), running("t3", 3)}},
		"a later turn that has not started is no reason to wait": {turn: waiting("t2", 2),
			turns: []Turn{waiting("t3", 3)}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := WaitsFor(tc.turn, tc.turns); got != tc.want {
				t.Errorf("waits for %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPrevious(t *testing.T) {
	turns := []Turn{
		ended("t1", 1, v1alpha1.PhaseSucceeded, 0, 0, "0"),
		ended("t2", 2, v1alpha1.PhaseFailed, 0, 0, "0"),
		{Name: "t3", Number: 3, Created: t0, Phase: v1alpha1.PhaseCancelled}, // cancelled before it started
		waiting("t5", 5),
	}
	if got, ok := Previous(waiting("t4", 4), turns); !ok || got.Name != "t2" {
		t.Errorf("the turn before t4 is %q (%v), want t2: the last that started and ended", got.Name, ok)
	}
	if _, ok := Previous(waiting("t1", 1), turns[1:]); ok {
		t.Error("the first turn follows on from a later one")
	}
}

// Deleting turns never gives a session's usage back: whatever turns are deleted between two
// looks, the usage counts every turn that ended, in order, before.
func TestDeletedTurnsKeepTheirUsage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 15).Draw(t, "turns")
		var all []Turn
		st := &v1alpha1.AgentSessionStatus{}
		var tokens int64
		cost := decimal.Zero
		for i := range n {
			tk := rapid.Int64Range(0, 1000).Draw(t, "tokens")
			c := decimal.New(rapid.Int64Range(0, 100).Draw(t, "cents"), -2)
			all = append(all, Turn{Name: string(rune('a' + i)), Number: int64(i + 1), Created: t0, Phase: v1alpha1.PhaseSucceeded,
				Tokens: tk, Cost: c, Started: true, Ended: t0.Add(time.Duration(i) * time.Second)})
			tokens, cost = tokens+tk, cost.Add(c)
			// The session's controller looks at what is left, some turns deleted since its last look.
			var left []Turn
			for _, turn := range all {
				if turn.Number == int64(i+1) || !rapid.Bool().Draw(t, "deleted") {
					left = append(left, turn)
				}
			}
			all = left
			d := Next(Facts{Now: t0, Session: &v1alpha1.AgentSession{Status: *st}, Turns: left})
			st = &d.Status
			if st.TokensUsed != tokens || !decimal.RequireFromString(st.Cost).Equal(cost) || st.Turns != int32(i+1) {
				t.Fatalf("after turn %d: %d tokens %s %d turns counted, want %d %s %d", i+1, st.TokensUsed, st.Cost, st.Turns, tokens, cost, i+1)
			}
			if u := UsageOf(st, left); u.Tokens != tokens || u.Started != int32(i+1) {
				t.Fatalf("after turn %d a turn is told %d tokens and %d turns were used, want %d and %d", i+1, u.Tokens, u.Started, tokens, i+1)
			}
		}
	})
}
