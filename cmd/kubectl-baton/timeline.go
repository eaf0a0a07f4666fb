package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/textbound"
)

// runStory is what the plugin reads of a run to tell it: the timeline, and the record of the
// tool call its gate holds.
type runStory struct {
	entries []runview.Entry
	held    *records.Record
	// unread says why the transcript was not read, when it was not: the timeline is then what
	// status holds, its latest steps.
	unread string
	// branches are the run's branches; branchesUnread says why their own runs were not read,
	// when they were not: they are then what the run's status says of its latest fan-out.
	branches       []runview.Branch
	branchesUnread string
	// gate is the spec of the gate the run waits at, from its config, when it could be read.
	gate *v1alpha1.ApprovalGate
}

// story reads the run's whole timeline from its transcript, a page at a time, keeping only what
// the timeline shows.
func (o *options) story(ctx context.Context, run *v1alpha1.AgentRun) runStory {
	var t runview.Transcript
	if op, err := o.operator(ctx); err != nil {
		t = runview.Unread(run, err.Error())
	} else {
		defer op.stop()
		t = runview.ReadTranscript(ctx, op, run, 0)
	}
	return runStory{entries: t.Timeline, held: t.Held, unread: t.Unread}
}

// earlier says what a timeline that starts after step 1 leaves out, and where to find it.
func earlier(shown []runview.Entry, steps, decisions int, unread string) string {
	first := int32(0)
	for _, e := range shown {
		if e.Kind == runview.EntryStep {
			first = e.Step
			break
		}
	}
	if first <= 1 {
		return ""
	}
	switch {
	case unread != "":
		return fmt.Sprintf("%d earlier steps: the transcript, which has them, was not read", first-1)
	case steps == 0:
		return fmt.Sprintf("%d earlier steps: the transcript has no record of them", first-1)
	case decisions > 0:
		return fmt.Sprintf("%d earlier steps and %d decisions not shown: --tail 0 shows them", first-1, decisions)
	}
	return fmt.Sprintf("%d earlier steps not shown: --tail 0 shows them", first-1)
}

func (o *options) handoffsCmd() *cobra.Command {
	var tail int
	cmd := &cobra.Command{
		Use:   "handoffs RUN",
		Short: "Print who handed off to whom at each step of a run, and why: every step, from the transcript",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, _, err := o.getRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st := o.story(cmd.Context(), run)
			handoffs(o.streams.Out, st, tail)
			return nil
		},
	}
	cmd.Flags().IntVar(&tail, "tail", runview.DefaultTail, "Show only the run's last N steps (0: every step)")
	return cmd
}

// handoffs prints one line a step: N. from -> to: reason.
func handoffs(out io.Writer, st runStory, tail int) {
	shown, left := runview.Latest(st.entries, tail)
	steps, decisions := left.Steps, left.Decisions
	if note := earlier(shown, steps, decisions, st.unread); note != "" {
		fmt.Fprintf(out, "  ... (%s)\n", note)
	}
	for _, e := range shown {
		if e.Kind != runview.EntryStep {
			continue
		}
		fmt.Fprintf(out, "  %d. %s -> %s%s\n", e.Step, e.Agent, to(e), prefixed(": ", textbound.Line(reason(e), 120)))
	}
	if st.unread != "" {
		fmt.Fprintf(out, "(transcript not read: %s)\n", st.unread)
	}
}

// to is where control went after a step.
func to(e runview.Entry) string {
	if e.To == "" {
		return "(end)"
	}
	return e.To
}

// reason is why control moved after a step: its signal and its reason.
func reason(e runview.Entry) string {
	if e.Signal != "" && e.Signal != e.Reason {
		return e.Signal + prefixed(": ", e.Reason)
	}
	return e.Reason
}
