package replay

import (
	"fmt"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/textbound"
)

// What a replay run's status says of what its replay found.

// Message says in a line what the replay of the recorded run found.
func (r Report) Message(run string) string {
	switch {
	case r.Same():
		return fmt.Sprintf("replayed run %s on the config as it is now: it ran the same path, tokens and end (%s)", run, r.Replayed.Reason)
	case r.Stopped != "":
		return fmt.Sprintf("replayed run %s on the config as it is now: the replay stopped: %s", run, r.Stopped)
	case r.Diverged == 0:
		return fmt.Sprintf("replayed run %s on the config as it is now: the same path, which ends %s (recorded: %s) with %d tokens (recorded: %d)",
			run, orPhase(r.Replayed), orPhase(r.Recorded), r.Replayed.Tokens, r.Recorded.Tokens)
	}
	return fmt.Sprintf("replayed run %s on the config as it is now: the paths part at handoff %d; it ends %s (recorded: %s)",
		run, r.Diverged, orPhase(r.Replayed), orPhase(r.Recorded))
}

func orPhase(s Summary) string {
	if s.Reason != "" {
		return string(s.Reason)
	}
	return string(s.Phase)
}

// Status is a replay run's status.replay: what the replay of the recorded run found.
func (r Report) Status(run string) *v1alpha1.ReplayStatus {
	outcome := func(s Summary) v1alpha1.ReplayOutcome {
		return v1alpha1.ReplayOutcome{Phase: s.Phase, Reason: s.Reason, Message: textbound.Status(s.Message, 1024),
			Steps: s.Steps, Tokens: s.Tokens, Cost: s.Cost}
	}
	return &v1alpha1.ReplayStatus{Run: run, Diverged: int32(r.Diverged), Stopped: textbound.Status(r.Stopped, 1024),
		Recorded: outcome(r.Recorded), Replayed: outcome(r.Replayed)}
}
