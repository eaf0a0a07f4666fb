package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
)

// A folder of tests holds one folder per case, named after it: the case's recorded run as
// run.json (kubectl baton transcript RUN -o json) and what its replay must come to as
// expect.yaml (docs/replay.md#tests).
const (
	caseRun    = "run.json"
	caseExpect = "expect.yaml"
	// maxCases bounds the cases of a folder, and maxEntries what else the folder may hold:
	// a folder of tests may come from anywhere.
	maxCases   = 1000
	maxEntries = 10 * maxCases
)

// caseStatus is how a case came out.
type caseStatus string

const (
	// resultPass: the replay met every expectation.
	resultPass caseStatus = "PASS"
	// resultFail: the replay missed an expectation.
	resultFail caseStatus = "FAIL"
	// resultError: the case could not be replayed (its files, or the config, cannot be read).
	resultError caseStatus = "ERROR"
)

// caseResult is one case's outcome.
type caseResult struct {
	Name   string     `json:"name"`
	Result caseStatus `json:"result"`
	// Failures are the expectations the replay missed, Error why the case could not be replayed.
	Failures []string `json:"failures,omitempty"`
	Error    string   `json:"error,omitempty"`
	// Replayed is what the replayed run came to, and Stopped why the replay stopped early.
	Replayed *replay.Summary `json:"replayed,omitempty"`
	Stopped  string          `json:"stopped,omitempty"`
	took     time.Duration
}

// testReport is the outcome of a folder of cases.
type testReport struct {
	Dir     string       `json:"dir"`
	Against string       `json:"against"`
	Cases   []caseResult `json:"cases"`
	Passed  int          `json:"passed"`
	Failed  int          `json:"failed"`
	Errors  int          `json:"errors"`
}

func (o *options) testCmd() *cobra.Command {
	var config, junit, output string
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Replay a folder of recorded runs against a config and check what each comes to",
		Long: "Test replays each case of DIR, a folder holding one folder per case with the recorded run (run.json, " +
			"an export of kubectl baton transcript RUN -o json) and its expectations (expect.yaml), in this process: " +
			"against the config each run pinned, or the one --config names. It prints PASS or FAIL for each case with " +
			"the expectations its replay missed, writes JUnit XML with --junit, and fails when any case does: exit " +
			"status 1 when a case failed its expectations, 2 when a case or the folder could not be replayed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runTests(cmd.Context(), args[0], config, junit, output)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "The config to replay every case against: a file holding an AgentConfig, or an AgentConfig's name (default: the config each run pinned)")
	cmd.Flags().StringVar(&junit, "junit", "", "Write the results as JUnit XML to this file")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json")
	return cmd
}

// runTests runs the cases of dir. An error that is not a case failing its expectations exits
// with status 2.
func (o *options) runTests(ctx context.Context, dir, config, junit, output string) error {
	err := o.testDir(ctx, dir, config, junit, output)
	var coded exitCode
	if err == nil || errors.As(err, &coded) {
		return err
	}
	return exitCode{code: 2, err: err}
}

// testDir replays each case of dir against the config, and reports.
func (o *options) testDir(ctx context.Context, dir, config, junit, output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("-o %s: use text or json", output)
	}
	names, err := caseNames(dir)
	if err != nil {
		return err
	}
	var spec *v1alpha1.AgentConfigSpec
	against := "the config each run pinned"
	if config != "" {
		s, a, err := o.replayConfig(ctx, config, nil)
		if err != nil {
			return err
		}
		spec, against = &s, a
	}
	rep := testReport{Dir: dir, Against: against}
	for _, name := range names {
		rep.add(runCase(filepath.Join(dir, name), name, spec))
	}
	return o.finishTests(rep, junit, output)
}

// finishTests writes the JUnit file and the results, and fails when a case did.
func (o *options) finishTests(rep testReport, junit, output string) error {
	if junit != "" {
		data, err := junitReport(filepath.Base(filepath.Clean(rep.Dir)), rep.Against, rep.Cases)
		if err != nil {
			return err
		}
		if err := os.WriteFile(junit, data, 0o644); err != nil {
			return fmt.Errorf("writing --junit: %w", err)
		}
	}
	if output == "json" {
		enc := json.NewEncoder(o.streams.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printTests(o.streams.Out, rep)
	}
	switch {
	case rep.Errors > 0:
		return exitCode{code: 2, err: fmt.Errorf("%d of %d cases failed and %d could not be replayed", rep.Failed, len(rep.Cases), rep.Errors)}
	case rep.Failed > 0:
		return exitCode{code: 1, err: fmt.Errorf("%d of %d cases failed", rep.Failed, len(rep.Cases))}
	}
	return nil
}

func (r *testReport) add(c caseResult) {
	r.Cases = append(r.Cases, c)
	switch c.Result {
	case resultPass:
		r.Passed++
	case resultFail:
		r.Failed++
	case resultError:
		r.Errors++
	}
}

// caseNames are the cases of a folder, in order: its folders, but those whose names start
// with a dot.
func caseNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var names []string
	for seen := 0; ; {
		entries, err := f.ReadDir(256)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", dir, err)
		}
		if seen += len(entries); seen > maxEntries {
			return nil, fmt.Errorf("%s holds more than %d entries", dir, maxEntries)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if st, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || !st.IsDir() {
				continue
			}
			if names = append(names, e.Name()); len(names) > maxCases {
				return nil, fmt.Errorf("%s holds more than %d cases", dir, maxCases)
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s holds no case: a folder per case, each with %s and %s", dir, caseRun, caseExpect)
	}
	slices.Sort(names)
	return names, nil
}

// runCase replays one case and checks its expectations.
func runCase(dir, name string, spec *v1alpha1.AgentConfigSpec) caseResult {
	start := time.Now()
	res := caseResult{Name: name}
	report, exp, err := replayCase(dir, spec)
	res.took = time.Since(start)
	if err != nil {
		res.Result, res.Error = resultError, err.Error()
		return res
	}
	res.Replayed, res.Stopped = &report.Replayed, report.Stopped
	if res.Failures = exp.check(report); len(res.Failures) > 0 {
		res.Result = resultFail
	} else {
		res.Result = resultPass
	}
	return res
}

// replayCase reads a case's expectations and recorded run, and replays the run against spec,
// or the config it pinned when spec is nil.
func replayCase(dir string, spec *v1alpha1.AgentConfigSpec) (replay.Report, *expectation, error) {
	data, err := readBounded(filepath.Join(dir, caseExpect), maxExpectBytes)
	if err != nil {
		return replay.Report{}, nil, err
	}
	exp, err := readExpectation(data)
	if err != nil {
		return replay.Report{}, nil, fmt.Errorf("%s: %w", caseExpect, err)
	}
	if data, err = readBounded(filepath.Join(dir, caseRun), records.MaxExportBytes); err != nil {
		return replay.Report{}, nil, err
	}
	e, err := records.ReadExport(data)
	if err != nil {
		return replay.Report{}, nil, fmt.Errorf("%s: %w", caseRun, err)
	}
	if spec == nil {
		if e.Config == nil {
			return replay.Report{}, nil, fmt.Errorf("%s: the export of run %s holds no config: name one with --config", caseRun, e.Run)
		}
		spec = &e.Config.Spec
	}
	report, err := replayExport(e, *spec, nil)
	if err != nil {
		return replay.Report{}, nil, fmt.Errorf("%s: %w", caseRun, err)
	}
	return report, exp, nil
}

// printTests prints a line for each case, the expectations it missed below it, and a summary.
func printTests(out io.Writer, rep testReport) {
	fmt.Fprintf(out, "Replaying %s of %s against %s\n\n", cases(len(rep.Cases)), rep.Dir, rep.Against)
	for _, c := range rep.Cases {
		fmt.Fprintf(out, "%-6s %s\n", c.Result, c.Name)
		for _, f := range c.Failures {
			fmt.Fprintf(out, "       %s\n", f)
		}
		if c.Error != "" {
			fmt.Fprintf(out, "       %s\n", c.Error)
		}
	}
	fmt.Fprintf(out, "\n%s: %d passed, %d failed", cases(len(rep.Cases)), rep.Passed, rep.Failed)
	if rep.Errors > 0 {
		fmt.Fprintf(out, ", %d could not be replayed", rep.Errors)
	}
	fmt.Fprintln(out)
}

func cases(n int) string {
	if n == 1 {
		return "1 case"
	}
	return fmt.Sprintf("%d cases", n)
}
