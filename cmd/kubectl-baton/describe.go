package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/transcriptapi"
)

func (o *options) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get RUN",
		Short: "Print a run's phase, agent, counts and reason on one line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, _, err := o.getRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(o.streams.Out, 0, 4, 3, ' ', 0)
			fmt.Fprintln(w, "NAME\tPHASE\tAGENT\tSTEPS\tHANDOFFS\tTOKENS\tREASON")
			s := run.Status
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", run.Name, s.Phase, s.CurrentAgent, s.StepCount, s.HandoffCount, s.TokensUsed, s.TerminationReason)
			return w.Flush()
		},
	}
}

func (o *options) describeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe RUN",
		Short: "Print a run's timeline: steps, handoffs, tokens and time per step, gates and decisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, _, err := o.getRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			// The transcript adds each step's latency and what it asked for; status alone still
			// gives the timeline.
			var records []transcriptapi.Record
			var note string
			if op, err := o.operator(cmd.Context()); err != nil {
				note = err.Error()
			} else {
				defer op.stop()
				page, err := op.Records(cmd.Context(), run.Namespace, run.Name, 0)
				if err != nil {
					note = err.Error()
				}
				records = page.Records
			}
			describe(o.streams.Out, run, records, note)
			return nil
		},
	}
}

// describe prints the run's timeline.
func describe(out io.Writer, run *v1alpha1.AgentRun, records []transcriptapi.Record, note string) {
	s := run.Status
	fmt.Fprintf(out, "Name:         %s\nNamespace:    %s\nConfig:       %s (%s)\nPhase:        %s\n", run.Name, run.Namespace,
		run.Spec.ConfigRef.Name, s.ConfigRevision, s.Phase)
	if s.TerminationReason != "" {
		fmt.Fprintf(out, "Reason:       %s: %s\n", s.TerminationReason, s.TerminationMessage)
	}
	fmt.Fprintf(out, "Counts:       %d steps, %d handoffs, %d tokens, %d tool calls, %d errors\n", s.StepCount, s.HandoffCount, s.TokensUsed, s.ToolCalls, s.ErrorCount)
	if s.StartTime != nil {
		end := time.Now()
		if s.CompletionTime != nil {
			end = s.CompletionTime.Time
		}
		// completionTime has a precision of seconds.
		fmt.Fprintf(out, "Duration:     %s (waiting for people: %s)\n", max(end.Sub(s.StartTime.Time), 0).Round(time.Second), s.Waited.OrZero().Round(time.Second))
	}
	byStep := map[int32]transcriptapi.StepBody{}
	for _, r := range records {
		if r.Kind == "step" {
			byStep[r.Step] = r.StepBody()
		}
	}
	fmt.Fprintln(out, "\nTimeline:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  STEP\tAGENT\tTO\tOUTCOME\tTOKENS\tTIME\tREASON")
	if first := firstStep(s); first > 1 {
		fmt.Fprintf(w, "  ...\t(%d earlier steps: kubectl baton transcript %s)\t\t\t\t\t\n", first-1, run.Name)
	}
	for _, h := range s.HandoffSequence {
		to := h.To
		if to == "" {
			to = "(end)"
		}
		latency := ""
		if b, ok := byStep[h.Step]; ok {
			latency = (time.Duration(b.LatencyMs) * time.Millisecond).String()
		}
		reason := h.Reason
		if h.Signal != "" {
			reason = h.Signal + prefixed(": ", reason)
		}
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\n", h.Step, h.From, to, h.Outcome, h.Tokens, latency, oneLine(reason, 70))
	}
	_ = w.Flush()
	if p := s.PendingApproval; p != nil {
		fmt.Fprintf(out, "\nWaiting at gate %s since %s (approved by: %s)\n", p.Gate, p.Since.Format(time.RFC3339), strings.Join(p.ApprovedBy, ", "))
		if c := p.ToolCall; c != nil {
			fmt.Fprintf(out, "  %s asks to call %s/%s (step %d, call %d) with %s\n", s.CurrentAgent, c.Server, c.Tool, c.Step, c.Call, oneLine(c.Arguments, 200))
		}
		fmt.Fprintf(out, "  kubectl baton approve %s %s | kubectl baton reject %s %s --feedback ...\n", run.Name, p.Gate, run.Name, p.Gate)
	}
	if p := s.PendingInput; p != nil {
		fmt.Fprintf(out, "\n%s asks: %s\n  kubectl baton reply %s \"...\"\n", p.Agent, oneLine(p.Question, 200), run.Name)
	}
	if len(s.Approvals) > 0 {
		fmt.Fprintln(out, "\nDecisions:")
		for _, a := range s.Approvals {
			fmt.Fprintf(out, "  %s  %s %s by %s%s\n", a.Time.Format(time.RFC3339), a.Decision, a.Gate, a.By, prefixed(": ", oneLine(a.Feedback, 80)))
		}
	}
	if s.Output != "" {
		fmt.Fprintf(out, "\nOutput:\n%s\n", indent(s.Output))
	}
	if note != "" {
		fmt.Fprintf(out, "\n(transcript not read: %s)\n", note)
	}
}

func firstStep(s v1alpha1.AgentRunStatus) int32 {
	if len(s.HandoffSequence) == 0 {
		return 0
	}
	return s.HandoffSequence[0].Step
}
