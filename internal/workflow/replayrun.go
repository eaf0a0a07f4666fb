package workflow

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A run with spec.replay replays a recorded run (package replay) outside the reconcile, and is
// Running while it does. Each replay it begins is counted in status.replay.attempts, written
// before the replay reads anything: an operator that stops during a replay (a restart, a crash)
// finds the count after it, and begins the replay again only while the count allows, so that a
// replay that takes the operator down cannot do so for ever.

// StartReplay starts a replay run pinned to revision: Running, its first replay of the recorded
// run begun.
func StartReplay(st v1alpha1.AgentRunStatus, recorded, revision string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	start := metav1.NewMicroTime(now)
	s.Phase = v1alpha1.PhaseRunning
	s.StartTime = &start
	s.ConfigRevision = revision
	s.Replay = &v1alpha1.ReplayStatus{Run: recorded, Attempts: 1}
	setCondition(s, now, v1alpha1.ConditionConfigResolved, metav1.ConditionTrue, v1alpha1.ReasonConfigPinned,
		fmt.Sprintf("pinned as %s", revision))
	progress(s, now, v1alpha1.PhaseRunning, replayingMessage(recorded, 1, ""))
	return d
}

// ResumeReplay decides on a replay run found Running with no replay under way: the one it began
// last did not end, for the reason why says (the operator stopped during it, or it could not
// read the transcript store). While the run has begun fewer than v1alpha1.MaxReplayAttempts,
// another is begun (again reports it, counted in the update); after that the run ends
// ReplayBudgetExceeded, saying so.
func ResumeReplay(st v1alpha1.AgentRunStatus, why string, now time.Time) (d Update, again bool) {
	d = Update{Status: *st.DeepCopy()}
	s := &d.Status
	if s.Replay == nil {
		s.Replay = &v1alpha1.ReplayStatus{}
	}
	r := s.Replay
	if r.Attempts >= v1alpha1.MaxReplayAttempts {
		end(&d, Trip{Reason: v1alpha1.ReasonReplayBudgetExceeded, Message: fmt.Sprintf(
			"the replay of run %s was begun %d times and never ended: %s; a replay is begun at most %d times",
			r.Run, r.Attempts, why, v1alpha1.MaxReplayAttempts)}, now)
		return d, false
	}
	r.Attempts++
	progress(s, now, v1alpha1.PhaseRunning, replayingMessage(r.Run, r.Attempts, why))
	return d, true
}

// replayingMessage is the Progressing condition's message while a replay runs: which attempt,
// and why the one before did not end.
func replayingMessage(recorded string, attempt int32, why string) string {
	msg := fmt.Sprintf("replaying the transcript of run %s (attempt %d of %d)", recorded, attempt, v1alpha1.MaxReplayAttempts)
	if why != "" {
		msg += ": attempt " + fmt.Sprint(attempt-1) + " did not end, " + why
	}
	return msg
}
