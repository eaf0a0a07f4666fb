package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcriptclient"
	"github.com/baton-dev/baton/internal/workflow"
)

func (o *options) transcriptCmd() *cobra.Command {
	var step int32
	var output string
	cmd := &cobra.Command{
		Use:   "transcript RUN",
		Short: "Print what a run's agents were given and answered, step by step, in full",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" && output != "yaml" {
				return fmt.Errorf("-o %s: use text, json or yaml", output)
			}
			ns, c, err := o.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.stop()
			page, err := c.Records(cmd.Context(), ns, args[0], step)
			if err != nil {
				return err
			}
			switch output {
			case "json", "yaml":
				// A whole run is the versioned export a replay reads; one step is that step's
				// records alone, as the transcript API pages them.
				var doc any = page
				if step == 0 {
					export, err := o.export(cmd.Context(), c, page)
					if err != nil {
						return err
					}
					doc = export
				}
				if output == "json" {
					enc := json.NewEncoder(o.streams.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(doc)
				}
				data, err := transcriptYAML(doc)
				if err != nil {
					return err
				}
				_, err = o.streams.Out.Write(data)
				return err
			}
			if len(page.Records) == 0 {
				fmt.Fprintf(o.streams.Out, "No records yet for agentrun %s.\n", args[0])
			}
			for _, r := range page.Records {
				printRecord(o.streams.Out, r)
			}
			return nil
		},
	}
	cmd.Flags().Int32Var(&step, "step", 0, "Only this step's records (-o json and yaml then give its records, not the export of the run)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, json or yaml")
	return cmd
}

// export is a run's transcript as a replay reads it (records.Export): its records, its spec and
// status as the user reads them, the config it pinned, from the transcript API, and the
// exports of the branch runs its fan-outs made.
func (o *options) export(ctx context.Context, c *operatorClient, page transcriptclient.Page) (*records.Export, error) {
	run, kube, err := o.getRun(ctx, page.Run)
	if err != nil {
		return nil, err
	}
	e := exportOf(run, page)
	if run.Status.ConfigRevision != "" {
		pinned, err := c.Config(ctx, page.Namespace, page.Run)
		if err != nil {
			return nil, fmt.Errorf("reading the config agentrun %s pinned: %w", page.Run, err)
		}
		e.Config = &pinned
	}
	budget := &records.ExportBudget{}
	if err := budget.AddRecords(run.Name, len(e.Records)); err != nil {
		return nil, err
	}
	if e.Branches, err = o.branchExports(ctx, c, kube, run, 1, budget); err != nil {
		return nil, err
	}
	return e, nil
}

// exportOf is the export of a run's records, without its config or branches.
func exportOf(run *v1alpha1.AgentRun, page transcriptclient.Page) *records.Export {
	e := &records.Export{APIVersion: records.ExportVersion, Kind: records.ExportKind, Namespace: page.Namespace, Run: page.Run,
		UID: page.UID, Records: page.Records, Spec: run.Spec, Status: run.Status, CreatedBy: run.Annotations[v1alpha1.AnnotationCreatedBy]}
	if e.Records == nil {
		e.Records = []records.Record{}
	}
	return e
}

// branchExports are the exports of the branch runs of run (those it controls, named as its
// fan-outs name them), read as the user, with their own branches, at depth. A user who may not
// list runs gets the export without them, and is told.
func (o *options) branchExports(ctx context.Context, c *operatorClient, kube client.Client, run *v1alpha1.AgentRun, depth int, budget *records.ExportBudget) ([]records.Export, error) {
	if run.Status.BranchesStarted == 0 {
		return nil, nil
	}
	list := &v1alpha1.AgentRunList{}
	err := kube.List(ctx, list, client.InNamespace(run.Namespace), client.MatchingLabels{v1alpha1.LabelParent: workflow.ParentLabel(run.Name)})
	if apierrors.IsForbidden(err) {
		fmt.Fprintf(o.streams.ErrOut, "warning: the export holds no branch runs of agentrun %s: you may not list agentruns in namespace %s, and a replay stops at its fan-outs\n",
			terminalSafe(run.Name), terminalSafe(run.Namespace))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the branch runs of agentrun %s: %w", run.Name, err)
	}
	var out []records.Export
	for i := range list.Items {
		b := &list.Items[i]
		if !workflow.IsBranchOf(b, run) {
			continue
		}
		if err := budget.AddBranch(run.Name, depth); err != nil {
			return nil, err
		}
		page, err := c.Records(ctx, b.Namespace, b.Name, 0)
		if err != nil {
			return nil, fmt.Errorf("reading the transcript of branch %s: %w", b.Name, err)
		}
		if err := budget.AddRecords(run.Name, len(page.Records)); err != nil {
			return nil, err
		}
		e := exportOf(b, page)
		if e.Branches, err = o.branchExports(ctx, c, kube, b, depth+1, budget); err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// transcriptYAML is an export as YAML. The YAML parser that converts JSON refuses the control
// characters JSON keeps raw (DEL, C1), so they are escaped in the JSON first, as terminalSafe
// escapes them, which JSON reads the same.
func transcriptYAML(doc any) ([]byte, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML([]byte(terminalSafe(strings.ToValidUTF8(string(data), "\uFFFD"))))
}

// printRecord prints a record in full, for people.
func printRecord(w io.Writer, r records.Record) {
	if r.IsTool() {
		printToolRecord(w, r)
		return
	}
	if r.Kind == "progress" {
		b := r.ProgressBody()
		fmt.Fprintf(w, "=== step %d: %s reports (%s) %s\n%s\n\n", r.Step, b.Agent, b.State, r.Time.Format(time.RFC3339), indent(b.Text))
		return
	}
	if r.Kind == transcript.KindHistory {
		printHistory(w, r)
		return
	}
	if r.Kind == transcript.KindSummary {
		b := r.SummaryBody()
		fmt.Fprintf(w, "=== %s summarized turns %s (%d tokens) %s\n%s\n\n", b.Agent, strings.Join(b.Turns, ", "), b.Tokens, r.Time.Format(time.RFC3339), indent(b.Summary))
		return
	}
	if r.Kind != "step" {
		// A record of nothing people decided (a run started from another keeps its next
		// agent's input so) is not shown.
		d := r.DecisionBody()
		if len(d.Decisions) == 0 && len(d.Context) == 0 {
			return
		}
		fmt.Fprintf(w, "=== after step %d: %s (%s)\n", r.Step, r.Kind, r.Time.Format(time.RFC3339))
		for _, decided := range d.Decisions {
			fmt.Fprintln(w, records.Said(decided))
		}
		for _, c := range d.Context {
			fmt.Fprintf(w, "%s from %s:\n%s\n", strings.ToLower(string(c.Kind)), c.From, indent(c.Text))
		}
		fmt.Fprintln(w)
		return
	}
	b := r.StepBody()
	fmt.Fprintf(w, "=== step %d: %s (%s%s) %s, %d tokens, %s\n", r.Step, b.Agent, b.Provider, prefixed("/", b.Model),
		r.Time.Format(time.RFC3339), b.Tokens, time.Duration(b.LatencyMs)*time.Millisecond)
	if len(b.Messages) > 0 {
		fmt.Fprintln(w, "--- messages")
		for _, m := range b.Messages {
			fmt.Fprintf(w, "[%s]\n%s\n", m.Role, indent(m.Content))
		}
	} else {
		fmt.Fprintf(w, "--- input\n%s\n", indent(b.Input))
	}
	if b.Error != "" {
		fmt.Fprintf(w, "--- failed\n%s\n", indent(b.Error))
	} else {
		finish := ""
		if b.FinishReason != "" {
			finish = " (finish: " + string(b.FinishReason) + ")"
		}
		fmt.Fprintf(w, "--- output%s\n%s\n", finish, indent(b.Output))
	}
	fmt.Fprintf(w, "--- next: %s\n\n", b.Next())
}

func (o *options) logsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's steps, one line each; -f follows them as they happen",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, c, err := o.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.stop()
			if !follow {
				page, err := c.Records(cmd.Context(), ns, args[0], 0)
				if err != nil {
					return err
				}
				for _, r := range page.Records {
					if line := logLine(r); line != "" {
						fmt.Fprintln(o.streams.Out, line)
					}
				}
				return nil
			}
			end, err := c.Stream(cmd.Context(), ns, args[0], func(r records.Record) error {
				line := logLine(r)
				if line == "" {
					return nil
				}
				_, err := fmt.Fprintln(o.streams.Out, line)
				return err
			})
			if err != nil && cmd.Context().Err() == nil {
				return err
			}
			if end != "" {
				fmt.Fprintf(o.streams.Out, "run ended: %s\n", end)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "Follow the run until it ends")
	return cmd
}

// logLine is one line of a record; "" for a record of nothing people decided.
func logLine(r records.Record) string {
	if r.IsTool() {
		return toolLine(r)
	}
	if r.Kind == "progress" {
		b := r.ProgressBody()
		return fmt.Sprintf("%s  step %-3d %-16s reports: %s", r.Time.Format("15:04:05"), r.Step, b.Agent, textbound.Line(b.Text, 80))
	}
	if r.Kind == transcript.KindSummary {
		b := r.SummaryBody()
		return fmt.Sprintf("%s  summary  %s summarized turns %s: %s", r.Time.Format("15:04:05"), b.Agent, strings.Join(b.Turns, ", "), textbound.Line(b.Summary, 80))
	}
	if r.Kind == transcript.KindHistory {
		h := r.HistoryBody()
		return fmt.Sprintf("%s  turn     given %d earlier turns; %s asks: %s", r.Time.Format("15:04:05"), len(h.Turns), asker(h.From), textbound.Line(h.Input, 80))
	}
	if r.Kind != "step" {
		d := r.DecisionBody()
		var parts []string
		for _, decided := range d.Decisions {
			parts = append(parts, records.Said(decided))
		}
		for _, c := range d.Context {
			parts = append(parts, fmt.Sprintf("%s from %s: %s", strings.ToLower(string(c.Kind)), c.From, textbound.Line(c.Text, 80)))
		}
		if len(parts) == 0 {
			return ""
		}
		return fmt.Sprintf("%s  after step %-3d %s", r.Time.Format("15:04:05"), r.Step, strings.Join(parts, "; "))
	}
	b := r.StepBody()
	text := b.Output
	if b.Error != "" {
		text = b.Error
	}
	return fmt.Sprintf("%s  step %-3d %-16s %-40s %6d tokens %8s  %s", r.Time.Format("15:04:05"), r.Step, b.Agent,
		textbound.Line(b.Next(), 40), b.Tokens, time.Duration(b.LatencyMs)*time.Millisecond, textbound.Line(text, 80))
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// connect reaches the transcript API, for a run in the namespace the kubeconfig flags say.
func (o *options) connect(ctx context.Context) (string, *operatorClient, error) {
	ns, err := o.namespace()
	if err != nil {
		return "", nil, err
	}
	c, err := o.operator(ctx)
	return ns, c, err
}

// namespace is the namespace the kubeconfig flags say.
func (o *options) namespace() (string, error) {
	return o.config.namespace()
}

// printHistory prints a turn's history record: what the turn was given of its session's
// earlier turns, and what it was asked.
func printHistory(w io.Writer, r records.Record) {
	h := r.HistoryBody()
	fmt.Fprintf(w, "=== turn of a session, given %d earlier turns (%s)\n", len(h.Turns), r.Time.Format(time.RFC3339))
	if h.Summary != "" {
		fmt.Fprintf(w, "the conversation before, summarized:\n%s\n", indent(h.Summary))
	}
	for _, t := range h.Turns {
		fmt.Fprintf(w, "%s: %s asked:\n%s\n", t.Turn, asker(t.From), indent(t.Input))
		if t.Output != "" {
			fmt.Fprintf(w, "the team answered:\n%s\n", indent(t.Output))
		}
	}
	fmt.Fprintf(w, "%s asks:\n%s\n\n", asker(h.From), indent(h.Input))
}

// asker is who asked a turn's question.
func asker(from string) string {
	if from == "" {
		return "the user"
	}
	return from
}
