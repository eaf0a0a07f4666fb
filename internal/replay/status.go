package replay

import (
	"fmt"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/textbound"
)

// What a replay run's status says of what its replay found.

// Message says in a line what the replay of the recorded run found.
func (rep Report) Message(run string) string {
	switch {
	case rep.Same():
		return fmt.Sprintf("replayed run %s on the config as it is now: it ran the same path, tokens and end (%s)", run, rep.Replayed.Reason)
	case rep.Stopped != "":
		return fmt.Sprintf("replayed run %s on the config as it is now: the replay stopped: %s", run, rep.Stopped)
	case rep.Diverged == 0:
		return fmt.Sprintf("replayed run %s on the config as it is now: the same path, which ends %s (recorded: %s) with %d tokens (recorded: %d)",
			run, orPhase(rep.Replayed), orPhase(rep.Recorded), rep.Replayed.Tokens, rep.Recorded.Tokens)
	}
	return fmt.Sprintf("replayed run %s on the config as it is now: the paths part at handoff %d; it ends %s (recorded: %s)",
		run, rep.Diverged, orPhase(rep.Replayed), orPhase(rep.Recorded))
}

func orPhase(s Summary) string {
	if s.Reason != "" {
		return string(s.Reason)
	}
	return string(s.Phase)
}

// Status is a replay run's status.replay: what the replay of the recorded run found.
func (rep Report) Status(run string) *v1alpha1.ReplayStatus {
	outcome := func(s Summary) v1alpha1.ReplayOutcome {
		return v1alpha1.ReplayOutcome{Phase: s.Phase, Reason: s.Reason, Message: textbound.Status(s.Message, 1024),
			Steps: s.Steps, Tokens: s.Tokens, Cost: s.Cost}
	}
	return &v1alpha1.ReplayStatus{Run: run, Diverged: int32(rep.Diverged), Stopped: textbound.Status(rep.Stopped, 1024),
		Recorded: outcome(rep.Recorded), Replayed: outcome(rep.Replayed)}
}
