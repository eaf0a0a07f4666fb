package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/textbound"
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
	var tail int
	cmd := &cobra.Command{
		Use:   "describe RUN | agentsession/SESSION",
		Short: "Print a run's timeline: steps, handoffs, tokens and time per step, branches, gates and decisions",
		Long: `Print a run's timeline: every step, with where control went and why, its tokens and time;
under a step that fanned out, the tree of its branches (each a run, with its own timeline); the
gate it waits at, with a held tool call's whole arguments; and people's decisions. The
timeline is read from the transcript, a page at a time; without it, it is what the run's status
holds (its latest steps). --tail picks how many of the latest steps to show.

agentsession/SESSION prints a session: its phase, counts and limits, and its turns in order, with
who asked each and what, and the last answer.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name := sessionName(args[0]); name != "" {
				return o.describeSessionNamed(cmd.Context(), name)
			}
			run, c, err := o.getRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st := o.story(cmd.Context(), run)
			st.branches, err = runview.ReadBranches(cmd.Context(), c, run)
			if err != nil {
				st.branchesUnread = err.Error()
			}
			if p := run.Status.PendingApproval; p != nil {
				cfg := &v1alpha1.AgentConfig{}
				if c.Get(cmd.Context(), client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.ConfigRef.Name}, cfg) == nil {
					st.gate = runview.GateSpec(cfg, run.Status.CurrentAgent, p.Gate)
				}
			}
			describe(o.streams.Out, run, st, tail)
			return nil
		},
	}
	cmd.Flags().IntVar(&tail, "tail", runview.DefaultTail, "Show only the run's last N steps (0: every step)")
	return cmd
}

// describe prints the run's timeline.
func describe(out io.Writer, run *v1alpha1.AgentRun, st runStory, tail int) {
	s := run.Status
	describeSummary(out, run)
	shown, left := runview.Latest(runview.WithoutWorking(run, st.entries), tail)
	steps, decisions := left.Steps, left.Decisions
	describeSteps(out, shown, earlier(shown, steps, decisions, st.unread), s.Currency, runview.AttachBranches(shown, st.branches))
	describeWaiting(out, run, st)
	var decided []runview.Entry
	for _, e := range shown {
		if e.Kind == runview.EntryDecision {
			decided = append(decided, e)
		}
	}
	if len(decided) > 0 {
		fmt.Fprintln(out, "\nDecisions:")
		for _, a := range decided {
			fmt.Fprintf(out, "  %s  %s %s by %s%s%s\n", a.Time.Format(time.RFC3339), a.Decision, a.Gate, a.By,
				prefixed(", back to ", a.To), prefixed(": ", textbound.Line(a.Feedback, 80)))
		}
	}
	if s.Output != "" {
		fmt.Fprintf(out, "\nOutput:\n%s\n", indent(s.Output))
	}
	if st.unread != "" {
		fmt.Fprintf(out, "\n(transcript not read: %s)\n", st.unread)
	}
	if st.branchesUnread != "" {
		fmt.Fprintf(out, "\n(branches' runs not read: %s; they are as the run's status says)\n", st.branchesUnread)
	}
}

// describeSummary prints what the run is and where it is: what it is a branch of, its config,
// phase, why it waits in the queue or why it ended, its counts, branches, cost and time.
func describeSummary(out io.Writer, run *v1alpha1.AgentRun) {
	s := run.Status
	fmt.Fprintf(out, "Name:         %s\nNamespace:    %s\n", run.Name, run.Namespace)
	if b := runview.BranchOf(run); b != nil {
		fmt.Fprintf(out, "Branch of:    %s (step %d, branch %d, depth %d)\n", b.Parent, b.Step, b.Index, b.Depth)
	}
	fmt.Fprintf(out, "Config:       %s (%s)\nPhase:        %s\n", run.Spec.ConfigRef.Name, s.ConfigRevision, s.Phase)
	if c := queued(run); c != nil {
		fmt.Fprintf(out, "Queued:       %s: %s\n", c.Reason, textbound.Line(c.Message, 300))
	}
	if s.TerminationReason != "" {
		fmt.Fprintf(out, "Reason:       %s: %s\n", s.TerminationReason, s.TerminationMessage)
	}
	if t := s.Taint; t != nil {
		fmt.Fprintf(out, "Tainted:      by %s, at step %d\n", t.Source, t.Step)
	}
	fmt.Fprintf(out, "Counts:       %d steps, %d handoffs, %d tokens, %d tool calls, %d errors\n", s.StepCount, s.HandoffCount, s.TokensUsed, s.ToolCalls, s.ErrorCount)
	if s.BranchesStarted > 0 {
		fmt.Fprintf(out, "Branches:     %d started, %d steps in branches that joined\n", s.BranchesStarted, s.BranchSteps)
	}
	if s.Cost != "" {
		fmt.Fprintf(out, "Cost:         %s\n", strings.TrimSpace(s.Cost+" "+s.Currency))
	}
	if s.StartTime != nil {
		end := time.Now()
		if s.CompletionTime != nil {
			end = s.CompletionTime.Time
		}
		// completionTime has a precision of seconds.
		fmt.Fprintf(out, "Duration:     %s (waiting for people: %s)\n", max(end.Sub(s.StartTime.Time), 0).Round(time.Second), s.Waited.OrZero().Round(time.Second))
	}
}

// queued is the Progressing condition of a run waiting Queued, which says what it waits for
// (reason QuotaExceeded or AwaitingAdmission) and its place; nil for a run that is not queued.
func queued(run *v1alpha1.AgentRun) *metav1.Condition {
	if run.Status.Phase != v1alpha1.PhaseQueued {
		return nil
	}
	return meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionProgressing)
}

// describeSteps prints the timeline's steps, a line each, after a line that says what comes
// before them when that is not shown, and under a step that fanned out, the tree of its
// branches (branches, by the step's place in shown). A step's cost is in the run's currency,
// blank when its endpoint has no prices.
func describeSteps(out io.Writer, shown []runview.Entry, before, currency string, branches map[int][]runview.Branch) {
	fmt.Fprintln(out, "\nTimeline:")
	if before != "" {
		// Above the table: a line of its own inside it would end its columns.
		fmt.Fprintf(out, "  ... (%s)\n", before)
	}
	var table bytes.Buffer
	w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "  STEP\tAGENT\tTO\tOUTCOME\tTOKENS\t%s\tTIME\tREASON\n", costHeading(currency))
	for i, e := range shown {
		switch e.Kind {
		case runview.EntryStep:
			latency := ""
			if e.Recorded {
				latency = e.Latency.String()
			}
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Step, e.Agent, to(e), textbound.Line(e.Outcome, 40), e.Tokens,
				textbound.Line(e.Cost, 32), latency, textbound.Line(reason(e), 70))
		case runview.EntryRunning:
			fmt.Fprintf(w, "  %d\t%s\t\t(working)\t\t\t\t\n", e.Step, e.Agent)
		}
		if len(branches[i]) > 0 {
			// A line of empty cells holds the tree's place, so the steps' columns go on past it.
			fmt.Fprintf(w, "  \t\t\t\t\t\t\t%s%d\n", treeMark, i)
		}
	}
	_ = w.Flush()
	withTrees(out, table.String(), branches)
}

// costHeading is the heading of the steps' cost column: COST, with the run's currency when it
// has one.
func costHeading(currency string) string {
	if currency == "" {
		return "COST"
	}
	return "COST (" + currency + ")"
}

// describeWaiting prints the gate the run waits at, with the whole arguments of a tool call it
// holds, or the question it waits to have answered.
func describeWaiting(out io.Writer, run *v1alpha1.AgentRun, st runStory) {
	s := run.Status
	if p := s.PendingApproval; p != nil {
		fmt.Fprintf(out, "\nWaiting at gate %s since %s (approved by: %s)\n", p.Gate, p.Since.Format(time.RFC3339), strings.Join(p.ApprovedBy, ", "))
		for _, line := range runview.Reaching(st.gate, p.Since.Time, time.Now()) {
			fmt.Fprintf(out, "  %s\n", line)
		}
		if g := p.Guard; g != nil {
			fmt.Fprintf(out, "  Guardrail %s asks a person to review %s of step %d%s; approved, the run goes on with it, rejected, it is blocked:\n%s\n",
				g.Guardrail, runview.GuardedText(*g), g.Step, prefixed(": ", g.Reason), indent(indent(g.Text)))
			fmt.Fprintf(out, "  (the run's status keeps the first 4 KiB of it; kubectl baton transcript %s --step %d has it whole)\n", run.Name, g.Step)
		} else if c := p.ToolCall; c != nil {
			h := runview.Held(c, st.held, st.unread)
			fmt.Fprintf(out, "  %s asks to call %s/%s (step %d, call %d) with:\n%s\n", s.CurrentAgent, h.Server, h.Tool, h.Step, h.Call, indent(indent(h.Arguments)))
			if h.Note != "" {
				fmt.Fprintf(out, "  (%s)\n", h.Note)
			}
			if h.Taint != "" {
				fmt.Fprintf(out, "  It was asked for with untrusted content in its context, from %s: was it asked for by the run's task, or by that content?\n", h.Taint)
			}
		}
		fmt.Fprintf(out, "  kubectl baton approve %s %s | kubectl baton reject %s %s --feedback ...\n", run.Name, p.Gate, run.Name, p.Gate)
	}
	if p := s.PendingInput; p != nil {
		fmt.Fprintf(out, "\n%s asks:\n%s\n  kubectl baton reply %s \"...\"\n", p.Agent, indent(indent(p.Question)), run.Name)
	}
}
