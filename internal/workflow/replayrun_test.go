package workflow

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A replay run is Running from its start, and counts each replay it begins; a run found
// replaying with no replay under way begins another while it may, then ends saying why.
func TestAReplayRunCountsTheReplaysItBegins(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	started := StartReplay(v1alpha1.AgentRunStatus{Phase: v1alpha1.PhasePending}, "ticket", "helpdesk-abc", now).Status
	if started.Phase != v1alpha1.PhaseRunning || started.StartTime == nil || started.ConfigRevision != "helpdesk-abc" ||
		started.Replay == nil || started.Replay.Run != "ticket" || started.Replay.Attempts != 1 {
		t.Fatalf("started: %+v", started)
	}
	cases := map[string]struct {
		attempts int32
		again    bool
		message  string
	}{
		"after the first attempt": {attempts: 1, again: true,
			message: "replaying the transcript of run ticket (attempt 2 of 3): attempt 1 did not end, the operator stopped during it"},
		"after the second attempt": {attempts: 2, again: true,
			message: "replaying the transcript of run ticket (attempt 3 of 3): attempt 2 did not end, the operator stopped during it"},
		"after the last attempt": {attempts: 3,
			message: "the replay of run ticket was begun 3 times and never ended: the operator stopped during it; a replay is begun at most 3 times"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := *started.DeepCopy()
			st.Replay.Attempts = tc.attempts
			d, again := ResumeReplay(st, "the operator stopped during it", now.Add(time.Minute))
			c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionProgressing)
			switch {
			case again != tc.again:
				t.Fatalf("again %t", again)
			case tc.again && (d.Status.Phase != v1alpha1.PhaseRunning || d.Status.Replay.Attempts != tc.attempts+1 || c.Message != tc.message):
				t.Fatalf("begun again: %s, attempts %d, %q", d.Status.Phase, d.Status.Replay.Attempts, c.Message)
			case !tc.again && (d.Status.Phase != v1alpha1.PhaseFailed || d.Status.TerminationReason != v1alpha1.ReasonReplayBudgetExceeded ||
				d.Status.TerminationMessage != tc.message || d.Status.Replay.Attempts != tc.attempts):
				t.Fatalf("ended: %s %s %q, attempts %d", d.Status.Phase, d.Status.TerminationReason, d.Status.TerminationMessage, d.Status.Replay.Attempts)
			}
			if started.Replay.Attempts != 1 {
				t.Fatal("the status decided on was changed")
			}
		})
	}
}
