package console

import (
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/transcriptapi"
)

// A run's timeline is transcriptapi's (BuildTimeline), as kubectl baton describe shows it: every
// step and decision from the transcript, or what status holds of them when the transcript cannot
// be read.

// lastOutput is what there is to judge at the gate the run waits at: the output of the step
// before it.
func lastOutput(run *v1alpha1.AgentRun, records []transcriptapi.Record) string {
	for i := len(records) - 1; i >= 0; i-- {
		if records[i].Kind == "step" {
			if b := records[i].StepBody(); b.Error == "" {
				return b.Output
			}
		}
	}
	if p := run.Status.PendingApproval; p != nil && p.Completes != nil {
		return run.Status.Output
	}
	return run.Status.Input
}

// clip shortens s to n characters, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
