package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/console"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcriptclient"
)

// defaultTail is how many of a run's latest steps describe and handoffs show unless told:
// enough for any run a person reads on a screen, and --tail 0 shows every step.
const defaultTail = 200

// runStory is what the plugin reads of a run to tell it: the timeline, and the record of the
// tool call its gate holds.
type runStory struct {
	entries []records.Entry
	held    *records.Record
	// unread says why the transcript was not read, when it was not: the timeline is then what
	// status holds, its latest steps.
	unread string
	// branches are the run's branches; branchesUnread says why their own runs were not read,
	// when they were not: they are then what the run's status says of its latest fan-out.
	branches       []console.Branch
	branchesUnread string
}

var errEarlierRun = errors.New("the transcript is of an earlier run of this name")

// story reads the run's whole timeline from its transcript, a page at a time, keeping only what
// the timeline shows.
func (o *options) story(ctx context.Context, run *v1alpha1.AgentRun) runStory {
	op, err := o.operator(ctx)
	if err != nil {
		return runStory{entries: records.BuildTimeline(run, nil), unread: err.Error()}
	}
	defer op.stop()
	var held *records.Record
	pending := run.Status.PendingApproval
	t := records.NewTimeline(run)
	err = op.Pages(ctx, run.Namespace, run.Name, 0, func(page transcriptclient.Page) error {
		if page.UID != "" && page.UID != string(run.UID) {
			return errEarlierRun
		}
		for _, r := range page.Records {
			t.Add(r)
			if pending != nil && records.Holds(pending.ToolCall, r) {
				held = &r
			}
		}
		return nil
	})
	if err != nil {
		return runStory{entries: records.BuildTimeline(run, nil), unread: err.Error()}
	}
	return runStory{entries: t.Entries(), held: held}
}

// earlier says what a timeline that starts after step 1 leaves out, and where to find it.
func earlier(shown []records.Entry, steps, decisions int, unread string) string {
	first := int32(0)
	for _, e := range shown {
		if e.Kind == records.EntryStep {
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
			handoffs(o.streams.Out, run, st, tail)
			return nil
		},
	}
	cmd.Flags().IntVar(&tail, "tail", defaultTail, "Show only the run's last N steps (0: every step)")
	return cmd
}

// handoffs prints one line a step: N. from -> to: reason.
func handoffs(out io.Writer, run *v1alpha1.AgentRun, st runStory, tail int) {
	shown, left := records.Latest(st.entries, tail)
	steps, decisions := left.Steps, left.Decisions
	if note := earlier(shown, steps, decisions, st.unread); note != "" {
		fmt.Fprintf(out, "  ... (%s)\n", note)
	}
	for _, e := range shown {
		if e.Kind != records.EntryStep {
			continue
		}
		fmt.Fprintf(out, "  %d. %s -> %s%s\n", e.Step, e.Agent, to(e), prefixed(": ", textbound.Line(reason(e), 120)))
	}
	if st.unread != "" {
		fmt.Fprintf(out, "(transcript not read: %s)\n", st.unread)
	}
}

// to is where control went after a step.
func to(e records.Entry) string {
	if e.To == "" {
		return "(end)"
	}
	return e.To
}

// reason is why control moved after a step: its signal and its reason.
func reason(e records.Entry) string {
	if e.Signal != "" && e.Signal != e.Reason {
		return e.Signal + prefixed(": ", e.Reason)
	}
	return e.Reason
}
