package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
)

// helpdeskReport is a replay of the helpdesk sample's run that reproduced it.
func helpdeskReport() replay.Report {
	step := func(n int32, from, to string, o v1alpha1.StepOutcome) v1alpha1.HandoffRecord {
		return v1alpha1.HandoffRecord{Step: n, From: from, To: to, Outcome: o}
	}
	s := replay.Summary{Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonTerminated, Steps: 3, Tokens: 1340, Cost: "0.0042",
		Output: "Ticket marked RESOLVED with the summary attached.",
		Path: []v1alpha1.HandoffRecord{
			step(1, "orchestrator", "memory", v1alpha1.OutcomeHandoff),
			step(2, "memory", "orchestrator", v1alpha1.OutcomeHandoff),
			step(3, "ticketing", "", v1alpha1.OutcomeSignal),
		}}
	return replay.Report{Recorded: s, Replayed: s}
}

func TestExpectationsSayWhatTheReplayMissed(t *testing.T) {
	for name, c := range map[string]struct {
		expect string
		change func(*replay.Report)
		want   []string
	}{
		"every expectation met": {expect: `
reason: Terminated
path: ["orchestrator -> memory", "memory -> orchestrator (Handoff)", "ticketing -> - (Signal)"]
maxTokens: 1340
maxCost: "0.0042"
gates: []
outputContains: RESOLVED`},
		"another end": {expect: "reason: Terminated", change: func(r *replay.Report) {
			r.Replayed.Reason = v1alpha1.ReasonMaxHandoffsExceeded
		}, want: []string{"reason: the replayed run ended MaxHandoffsExceeded, want Terminated"}},
		"a path that parts": {expect: `path: ["orchestrator -> memory", "memory -> ticketing", "ticketing -> -"]`,
			want: []string{"path: handoff 2 is memory -> orchestrator (Handoff), want memory -> ticketing"}},
		"another outcome": {expect: `path: ["orchestrator -> memory", "memory -> orchestrator", "ticketing -> - (Final)"]`,
			want: []string{"path: handoff 3 is ticketing -> - (Signal), want ticketing -> - (Final)"}},
		"a path that ends early": {expect: `path: ["orchestrator -> memory", "memory -> orchestrator", "ticketing -> -", "orchestrator -> memory"]`,
			want: []string{"path: the replayed path ends after 3 handoffs, want handoff 4 orchestrator -> memory"}},
		"a path that goes on": {expect: `path: ["orchestrator -> memory", "memory -> orchestrator"]`,
			want: []string{"path: the replayed path goes on past the 2 handoffs expected: handoff 3 is ticketing -> - (Signal)"}},
		"a prefix met": {expect: `pathPrefix: ["orchestrator -> memory", "memory -> orchestrator"]`},
		"a prefix missed": {expect: `pathPrefix: ["orchestrator -> ticketing"]`,
			want: []string{"pathPrefix: handoff 1 is orchestrator -> memory (Handoff), want orchestrator -> ticketing"}},
		"more tokens": {expect: "maxTokens: 1339",
			want: []string{"maxTokens: the replayed run used 1340 tokens, more than 1339"}},
		"more cost, by the last digit": {expect: `maxCost: "0.00419999999"`,
			want: []string{"maxCost: the replayed run cost 0.0042, more than 0.00419999999"}},
		"cost within, written with trailing zeros": {expect: `maxCost: "0.004200"`},
		"no cost recorded is none":                 {expect: `maxCost: "0"`, change: func(r *replay.Report) { r.Replayed.Cost = "" }},
		"a gate reached that none was expected at": {expect: "gates: []",
			change: func(r *replay.Report) { r.Replayed.Gates = []string{"refund"} },
			want:   []string{"gates: the replayed run reached [refund], want no gate"}},
		"gates in another order": {expect: "gates: [plan, final]",
			change: func(r *replay.Report) { r.Replayed.Gates = []string{"final", "plan"} },
			want:   []string{"gates: the replayed run reached [final, plan], want [plan, final]"}},
		"gates not checked": {expect: "reason: Terminated", change: func(r *replay.Report) { r.Replayed.Gates = []string{"refund"} }},
		"output without the text": {expect: "outputContains: CLOSED",
			want: []string{`outputContains: the replayed run's output does not contain "CLOSED"; it is "Ticket marked RESOLVED with the summary attached."`}},
		"no output at all": {expect: "outputContains: RESOLVED", change: func(r *replay.Report) { r.Replayed.Output = "" },
			want: []string{`outputContains: the replayed run has no output, want one containing "RESOLVED"`}},
		"a replay that stopped early": {expect: "reason: Terminated",
			change: func(r *replay.Report) { r.Stopped, r.Replayed.Reason = "after step 2 the run waits at gate refund", "" },
			want: []string{"the replay stopped early: after step 2 the run waits at gate refund",
				"reason: the replayed run ended -, want Terminated"}},
		"a stop expected": {expect: "stopped: gate refund",
			change: func(r *replay.Report) { r.Stopped = "after step 2 the run waits at gate refund" }},
		"a stop expected that did not come": {expect: "stopped: gate refund",
			want: []string{`stopped: the replay did not stop early, want it stopped saying "gate refund"`}},
		"another stop": {expect: "stopped: gate refund",
			change: func(r *replay.Report) { r.Stopped = "step 4 fans out" },
			want:   []string{`stopped: the replay stopped saying "step 4 fans out", want "gate refund" in it`}},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := readExpectation([]byte(c.expect))
			if err != nil {
				t.Fatal(err)
			}
			r := helpdeskReport()
			if c.change != nil {
				c.change(&r)
			}
			if diff := cmp.Diff(c.want, e.check(r)); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnExpectationThatCannotBeReadSaysWhy(t *testing.T) {
	for name, c := range map[string]struct{ expect, want string }{
		"an unknown field":         {"reason: Terminated\nmaxToken: 5", `unknown field "maxToken"`},
		"a field given twice":      {"reason: Terminated\nreason: Completed", `"reason" already set`},
		"nothing expected":         {"# nothing\n", "it expects nothing"},
		"path and its prefix":      {"path: [a -> b]\npathPrefix: [a -> b]", "give path or pathPrefix, not both"},
		"a step without its arrow": {"path: [orchestrator memory]", `path[0]: "orchestrator memory": write "FROM -> TO"`},
		"a step without its end":   {"pathPrefix: [a -> b, 'a ->']", `pathPrefix[1]: "a ->": write "FROM -> TO"`},
		"a cost as a number":       {"maxCost: 0.05", `maxCost 0.05: quote it, such as "0.05"`},
		"a cost with a sign":       {`maxCost: "-1"`, `maxCost: "-1" has a sign`},
		"negative tokens":          {"maxTokens: -1", "maxTokens -1 is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readExpectation([]byte(c.expect))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestJUnitHasACaseForEachRunAndAFailureForEachMiss(t *testing.T) {
	results := []caseResult{
		{Name: "ticket-1234", Result: resultPass, took: 1500 * time.Millisecond},
		{Name: "lower", Result: resultFail, took: 2 * time.Millisecond,
			Failures: []string{"reason: the replayed run ended MaxHandoffsExceeded, want Terminated", "path: handoff 4 is <\x1b>"}},
		{Name: "broken", Result: resultError, Error: `expect.yaml: unknown field "maxToken"`},
	}
	data, err := junitReport("helpdesk", "config helpdesk from helpdesk.yaml", results)
	if err != nil {
		t.Fatal(err)
	}
	want := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="kubectl baton test" tests="3" failures="1" errors="1" time="1.502">
  <testsuite name="helpdesk" tests="3" failures="1" errors="1" time="1.502">
    <properties>
      <property name="config" value="config helpdesk from helpdesk.yaml"></property>
    </properties>
    <testcase name="ticket-1234" classname="helpdesk" time="1.500"></testcase>
    <testcase name="lower" classname="helpdesk" time="0.002">
      <failure message="reason: the replayed run ended MaxHandoffsExceeded, want Terminated" type="expectation">reason: the replayed run ended MaxHandoffsExceeded, want Terminated&#xA;path: handoff 4 is &lt;` + "\uFFFD" + `&gt;</failure>
    </testcase>
    <testcase name="broken" classname="helpdesk" time="0.000">
      <error message="expect.yaml: unknown field &#34;maxToken&#34;" type="replay">expect.yaml: unknown field &#34;maxToken&#34;</error>
    </testcase>
  </testsuite>
</testsuites>
`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("JUnit XML (-want +got):\n%s", diff)
	}
	var back junitSuites
	if err := xml.Unmarshal(data, &back); err != nil {
		t.Fatalf("the JUnit XML does not read back: %v", err)
	}
}

// runPlugin runs the plugin's command line and returns what it printed and its error.
func runPlugin(args ...string) (string, error) {
	var out bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

const helpdeskTests = "../../config/samples/replay-tests/helpdesk"

func TestTheHelpdeskSamplesPassAgainstTheSampleConfig(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "junit.xml")
	out, err := runPlugin("test", helpdeskTests, "--config", "../../config/samples/helpdesk.yaml", "--junit", junit)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, line := range []string{"PASS   ticket-1234\n", "PASS   ticket-1235\n", "2 cases: 2 passed, 0 failed\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("no %q in:\n%s", line, out)
		}
	}
	if data, err := os.ReadFile(junit); err != nil || !strings.Contains(string(data), `tests="2" failures="0" errors="0"`) {
		t.Errorf("JUnit XML %s (%v)", data, err)
	}
}

func TestALowerHandoffLimitFailsTheCaseItCuts(t *testing.T) {
	dir := t.TempDir()
	sample, err := os.ReadFile("../../config/samples/helpdesk.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lower := strings.Replace(string(sample), "    maxHandoffs: 20\n", "    maxHandoffs: 3\n", 1)
	if lower == string(sample) {
		t.Fatal("the sample no longer sets maxHandoffs: 20")
	}
	config := filepath.Join(dir, "helpdesk.yaml")
	if err := os.WriteFile(config, []byte(lower), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runPlugin("test", helpdeskTests, "--config", config, "-o", "json")
	if err == nil || err.Error() != "1 of 2 cases failed" {
		t.Fatalf("error %v, want 1 of 2 cases failed\n%s", err, out)
	}
	for _, want := range []string{`"name": "ticket-1234",
      "result": "FAIL"`, `"reason: the replayed run ended MaxHandoffsExceeded, want Terminated"`, `"name": "ticket-1235",
      "result": "PASS"`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}

func TestAFolderThatIsNoTestSaysWhy(t *testing.T) {
	empty := t.TempDir()
	if _, err := runPlugin("test", empty); err == nil || !strings.Contains(err.Error(), "holds no case") {
		t.Errorf("an empty folder: %v", err)
	}
	broken := t.TempDir()
	if err := os.Mkdir(filepath.Join(broken, "lost"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := runPlugin("test", broken)
	if err == nil || err.Error() != "0 of 1 cases failed and 1 could not be replayed" {
		t.Errorf("a case without its files: %v", err)
	}
	if !strings.Contains(out, "ERROR  lost\n       open "+filepath.Join(broken, "lost", "expect.yaml")) {
		t.Errorf("a case without its files:\n%s", out)
	}
}

// A run whose namespace's quota bounded its limits replays under those limits, as the operator
// replays it: the plugin gives a run no more than its quota did.
func TestAReplayKeepsTheLimitsAQuotaSet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(helpdeskTests, "ticket-1234", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e records.Export
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	if e.Config == nil {
		t.Fatal("the sample export holds no config")
	}
	free, err := replayExport(&e, e.Config.Spec, nil)
	if err != nil || !free.Same() {
		t.Fatalf("the sample replays to %+v (%v); want the same run", free.Replayed, err)
	}
	e.Status.Limits = &v1alpha1.EffectiveLimits{MaxSteps: 1, SetBy: []v1alpha1.LimitSource{{Limit: "maxSteps", Quota: "tenants"}}}
	bounded, err := replayExport(&e, e.Config.Spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bounded.Replayed.Reason != v1alpha1.ReasonMaxStepsExceeded {
		t.Errorf("with the quota's maxSteps 1 the replay ends %s after %d steps; want MaxStepsExceeded", bounded.Replayed.Reason, bounded.Replayed.Steps)
	}
}
