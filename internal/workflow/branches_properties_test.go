package workflow

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TestPropertyAJoinHoldsOnlyWhenItsConfigSays drives a fan-out of any number of branches whose
// runs start and end in any order, any way, under any join (mode, quorum, onFailure, timeout),
// and checks at every Join:
//   - the run leaves branching once, and only when the join holds: enough branches succeeded,
//     or, with onFailure Continue, every branch ended or the timeout passed; with Fail, a
//     failed branch or the timeout ends it BranchFailed;
//   - what the branches used is counted once, when the run leaves branching, and only for the
//     branches that ended;
//   - the branches it cancels are exactly those not ended then.
func TestPropertyAJoinHoldsOnlyWhenItsConfigSays(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(t, "branches")
		join := v1alpha1.Join{
			Mode:      rapid.SampledFrom([]v1alpha1.JoinMode{v1alpha1.JoinAll, v1alpha1.JoinQuorum, v1alpha1.JoinFirst}).Draw(t, "mode"),
			OnFailure: rapid.SampledFrom([]v1alpha1.JoinFailurePolicy{v1alpha1.JoinFail, v1alpha1.JoinContinue}).Draw(t, "onFailure"),
		}
		if join.Mode == v1alpha1.JoinQuorum {
			join.Quorum = int32(rapid.IntRange(1, 3).Draw(t, "quorum"))
		}
		timeout := time.Duration(0)
		if rapid.Bool().Draw(t, "timeout") {
			timeout = time.Duration(rapid.IntRange(1, 10).Draw(t, "timeoutSeconds")) * time.Second
			d := v1alpha1.Duration(timeout.String())
			join.Timeout = &d
		}
		p, errs := NewPlan(research(join, "").Obj().Spec, nil)
		if len(errs) > 0 {
			t.Skip("config refused", errs)
		}
		p = p.ForRun("r", "ns", "", "")
		agents := []string{"researcher", "critic", "researcher"}[:n]
		st := started(p)
		st = Apply(p, st, fanOutStep(st, agents...), t0).Status
		if !Branching(&st) {
			t.Fatalf("the fan-out did not branch: %+v", st.HandoffSequence)
		}
		before := st.TokensUsed
		runs := map[string]BranchRun{}
		now := t0
		for event := 0; Branching(&st); event++ {
			if event > 4*n+2 {
				t.Fatalf("still branching after %d events: %+v", event, st.Branches)
			}
			// One branch moves on: it starts, or ends some way; or time passes.
			i := rapid.IntRange(0, n).Draw(t, fmt.Sprintf("who%d", event))
			if i == n {
				now = now.Add(time.Duration(rapid.IntRange(1, 5).Draw(t, fmt.Sprintf("wait%d", event))) * time.Second)
			} else {
				name := st.Branches[i].Name
				if r := runs[name]; !r.Phase.Terminal() {
					runs[name] = drawBranchRun(t, r, event)
				}
			}
			d, cancel := Join(p, st, runs, now)
			checkJoin(t, join, timeout, st, d, cancel, runs, now, before)
			st = d.Status
			if event > 4*n {
				// Every branch has had its turns: end them all so that the run must leave.
				for _, b := range st.Branches {
					if r := runs[b.Name]; !r.Phase.Terminal() {
						runs[b.Name] = succeededRun("late")
					}
				}
			}
		}
	})
}

// drawBranchRun moves a branch's run on from r: it starts, or it ends.
func drawBranchRun(t *rapid.T, r BranchRun, event int) BranchRun {
	if !r.Found && rapid.Bool().Draw(t, fmt.Sprintf("start%d", event)) {
		return runningRun
	}
	switch rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("end%d", event)) {
	case 0:
		return succeededRun("found it")
	case 1:
		return failedRun
	}
	return ended(v1alpha1.PhaseCancelled, v1alpha1.ReasonCancelled, "")
}

// checkJoin checks one Join of a branching run st against the join's rules.
func checkJoin(t *rapid.T, join v1alpha1.Join, timeout time.Duration, st v1alpha1.AgentRunStatus, d Update, cancel []string,
	runs map[string]BranchRun, now time.Time, before int64) {
	n := len(st.Branches)
	var succeeded, ended, failed int
	var tokens int64
	for _, b := range st.Branches {
		r := runs[b.Name]
		if !r.Found || !r.Phase.Terminal() {
			continue
		}
		ended++
		tokens += r.Tokens
		if r.Phase == v1alpha1.PhaseSucceeded {
			succeeded++
		} else {
			failed++
		}
	}
	needed := map[v1alpha1.JoinMode]int{v1alpha1.JoinAll: n, v1alpha1.JoinQuorum: min(int(join.Quorum), n), v1alpha1.JoinFirst: 1}[join.Mode]
	timedOut := timeout > 0 && !now.Before(t0.Add(timeout))
	fail := join.OnFailure == v1alpha1.JoinFail
	s := d.Status
	switch {
	case Branching(&s):
		if len(cancel) > 0 {
			t.Fatalf("cancelled %v while still branching", cancel)
		}
		if (fail && failed > 0) || succeeded >= needed || timedOut || (!fail && ended == n) {
			t.Fatalf("still branching with %d succeeded, %d failed, %d ended of %d (needed %d, %s, timed out %v)",
				succeeded, failed, ended, n, needed, join.OnFailure, timedOut)
		}
		return
	case s.Phase == v1alpha1.PhaseFailed && s.TerminationReason == v1alpha1.ReasonBranchFailed:
		if !fail || (failed == 0 && !timedOut) {
			t.Fatalf("ended BranchFailed with %d failed, timed out %v, onFailure %s", failed, timedOut, join.OnFailure)
		}
	case s.HandoffSequence[len(s.HandoffSequence)-1].Outcome == v1alpha1.OutcomeJoined:
		if (fail && failed > 0) || (succeeded < needed && (fail || (ended < n && !timedOut))) {
			t.Fatalf("joined with %d succeeded, %d failed, %d ended of %d (needed %d, %s, timed out %v)",
				succeeded, failed, ended, n, needed, join.OnFailure, timedOut)
		}
	default:
		t.Fatalf("left branching as %s/%s", s.Phase, s.TerminationReason)
	}
	if s.TokensUsed != before+tokens {
		t.Fatalf("tokens %d after the join; want %d before and %d of the branches that ended", s.TokensUsed, before, tokens)
	}
	if len(cancel) != n-ended {
		t.Fatalf("cancelled %v; want the %d branches not ended", cancel, n-ended)
	}
}
