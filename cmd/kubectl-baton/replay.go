package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/workflow"
)

func (o *options) replayCmd() *cobra.Command {
	var file, config, output string
	var live liveFlags
	cmd := &cobra.Command{
		Use:   "replay (RUN | -f FILE)",
		Short: "Replay a recorded run against a config, in this process, and say where its path changes",
		Long: "Replay runs a recorded run through the same workflow core the operator uses, with no cluster needed for an " +
			"exported file: each agent answers with its recorded turns in order, gates pass by the recorded decisions " +
			"the config now counts. It reports the first step where the path changes, both paths, and their ends.",
		Args: func(_ *cobra.Command, args []string) error {
			if (file == "") == (len(args) == 0) || len(args) > 1 {
				return errors.New("name one run, or give its exported transcript with -f")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %s: use text or json", output)
			}
			e, err := o.recording(cmd.Context(), file, args)
			if err != nil {
				return err
			}
			spec, against, err := o.replayConfig(cmd.Context(), config, e)
			if err != nil {
				return err
			}
			opts, err := o.liveOptions(cmd.Context(), live, e, file != "", config)
			if err != nil {
				return err
			}
			report, err := replayExport(e, spec, opts)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(o.streams.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			printReport(o.streams.Out, e, against, report)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "A run's exported transcript (kubectl baton transcript RUN -o json)")
	cmd.Flags().StringVar(&config, "config", "", "The config to replay against: a file holding an AgentConfig, or an AgentConfig's name (default: the config the run pinned)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json")
	live.add(cmd)
	return cmd
}

// recording is the export to replay: the file's, or the named run's, read from the cluster.
func (o *options) recording(ctx context.Context, file string, args []string) (*records.Export, error) {
	if file == "" {
		ns, c, err := o.connect(ctx)
		if err != nil {
			return nil, err
		}
		defer c.stop()
		page, err := c.Records(ctx, ns, args[0], 0)
		if err != nil {
			return nil, err
		}
		e, err := o.export(ctx, c, page)
		if err != nil {
			return nil, err
		}
		if err := e.Check(); err != nil {
			return nil, err
		}
		return e, nil
	}
	data, err := readBounded(file, records.MaxExportBytes)
	if err != nil {
		return nil, err
	}
	return records.ReadExport(data)
}

// replayConfig is the config to replay against, and how to name it: the file's AgentConfig, the
// named AgentConfig of the namespace, or the config the run pinned.
func (o *options) replayConfig(ctx context.Context, config string, e *records.Export) (v1alpha1.AgentConfigSpec, string, error) {
	if config == "" {
		if e.Config == nil {
			return v1alpha1.AgentConfigSpec{}, "", fmt.Errorf("the export of run %s holds no config: name one with --config", e.Run)
		}
		return e.Config.Spec, "its pinned config " + e.Config.Revision, nil
	}
	if _, err := os.Stat(config); err == nil {
		cfg, err := configFromFile(config)
		if err != nil {
			return v1alpha1.AgentConfigSpec{}, "", err
		}
		return cfg.Spec, "config " + cfg.Name + " from " + config, nil
	}
	c, ns, err := o.kubeClient()
	if err != nil {
		return v1alpha1.AgentConfigSpec{}, "", err
	}
	cfg := &v1alpha1.AgentConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: config}, cfg); err != nil {
		return v1alpha1.AgentConfigSpec{}, "", fmt.Errorf("--config %s is no file, and reading the AgentConfig of that name: %w", config, err)
	}
	return cfg.Spec, "config " + cfg.Name + " of namespace " + ns, nil
}

// configFromFile is the AgentConfig a YAML or JSON file holds, among its documents.
func configFromFile(path string) (*v1alpha1.AgentConfig, error) {
	data, err := readBounded(path, 4<<20)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		cfg := &v1alpha1.AgentConfig{}
		if err := dec.Decode(cfg); errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s holds no AgentConfig", path)
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if cfg.Kind == "AgentConfig" {
			return cfg, nil
		}
	}
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// replayExport replays the export against spec, with the run's own limits and approvals; opts
// answers the turns the recording lacks, when it can. The run's limits are those it started
// with: its own, bounded by what its namespace's quotas set (status.limits), as the operator
// replays it.
func replayExport(e *records.Export, spec v1alpha1.AgentConfigSpec, opts func(*workflow.Plan, replay.Recording) replay.Options) (replay.Report, error) {
	rec, err := replay.FromExport(e)
	if err != nil {
		return replay.Report{}, err
	}
	p, errs := workflow.NewPlan(spec, quota.Overrides(e.Spec.Limits, e.Status.Limits))
	if len(errs) > 0 {
		return replay.Report{}, fmt.Errorf("the config cannot run: %w", errs.ToAggregate())
	}
	p = p.ForRun(e.Run, e.Namespace, e.Spec.Approvals, e.CreatedBy)
	if b := e.Spec.Branch; b != nil {
		// A branch run replays as it ran: from its agent, as deep as it was.
		p = p.AsBranch(b.Agent, b.Depth)
	}
	var o replay.Options
	if opts != nil {
		o = opts(p, rec)
	}
	return replay.Run(p, rec, o), nil
}

// printReport prints the two paths side by side, where they part, and both ends.
func printReport(out io.Writer, e *records.Export, against string, r replay.Report) {
	fmt.Fprintf(out, "Replay of agentrun %s against %s\n\n", e.Run, against)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\tRECORDED\tREPLAYED\t")
	for i := range max(len(r.Recorded.Path), len(r.Replayed.Path)) {
		mark := ""
		if r.Diverged == i+1 {
			mark = "<- paths part"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", i+1, handoffAt(r.Recorded.Path, i), handoffAt(r.Replayed.Path, i), mark)
	}
	_ = w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\tRECORDED\tREPLAYED")
	fmt.Fprintf(w, "Phase\t%s\t%s\n", r.Recorded.Phase, r.Replayed.Phase)
	fmt.Fprintf(w, "Reason\t%s\t%s\n", orDash(string(r.Recorded.Reason)), orDash(string(r.Replayed.Reason)))
	fmt.Fprintf(w, "Steps\t%d\t%d\n", r.Recorded.Steps, r.Replayed.Steps)
	fmt.Fprintf(w, "Tokens\t%d\t%d\n", r.Recorded.Tokens, r.Replayed.Tokens)
	fmt.Fprintf(w, "Cost\t%s\t%s\n", orDash(r.Recorded.Cost), orDash(r.Replayed.Cost))
	_ = w.Flush()
	fmt.Fprintln(out)
	switch {
	case r.Same():
		fmt.Fprintln(out, "The replay reproduced the run: the same path, tokens and end.")
	case r.Diverged > 0:
		fmt.Fprintf(out, "The paths part at handoff %d.\n", r.Diverged)
	case r.Stopped == "" && len(r.Live) == 0:
		fmt.Fprintln(out, "The paths are the same; the runs end apart, as above.")
	}
	if len(r.Live) > 0 {
		fmt.Fprintf(out, "Answered live: step%s %s.\n", plural(len(r.Live)), joinSteps(r.Live))
	}
	if r.Stopped != "" {
		fmt.Fprintf(out, "The replay stopped: %s.\n", r.Stopped)
	}
	if msg := r.Replayed.Message; msg != "" && r.Replayed.Reason != r.Recorded.Reason {
		fmt.Fprintf(out, "The replayed run ended: %s\n", terminalSafe(msg))
	}
	printBranches(out, "", r.Branches)
}

// printBranches says in a line each what the replay of each branch found, its own branches
// below it.
func printBranches(out io.Writer, indent string, branches []replay.BranchReport) {
	if len(branches) > 0 && indent == "" {
		fmt.Fprintln(out, "\nBranches:")
	}
	for _, b := range branches {
		found := "reproduced"
		switch {
		case b.Open && b.Stopped == "" && b.Diverged == 0:
			found = "cancelled in the recorded run before it ended: replayed as far as it ran"
		case b.Stopped != "":
			found = "stopped: " + b.Stopped
		case b.Diverged > 0:
			found = fmt.Sprintf("the paths part at handoff %d; it ends %s (recorded: %s)", b.Diverged, orDash(string(b.Replayed.Reason)), orDash(string(b.Recorded.Reason)))
		case !b.Same():
			found = fmt.Sprintf("the same path; it ends %s with %d tokens (recorded: %s with %d)", orDash(string(b.Replayed.Reason)), b.Replayed.Tokens,
				orDash(string(b.Recorded.Reason)), b.Recorded.Tokens)
		}
		fmt.Fprintf(out, "%s  step %d, branch %d (%s): %s: %s\n", indent, b.Step, b.Index, terminalSafe(b.Agent), terminalSafe(b.Name), terminalSafe(found))
		printBranches(out, indent+"  ", b.Branches)
	}
}

// handoffAt is the i-th handoff record of a path, in a line, or "" past its end.
func handoffAt(path []v1alpha1.HandoffRecord, i int) string {
	if i >= len(path) {
		return ""
	}
	h := path[i]
	return fmt.Sprintf("%s -> %s (%s)", terminalSafe(h.From), orDash(terminalSafe(h.To)), h.Outcome)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
