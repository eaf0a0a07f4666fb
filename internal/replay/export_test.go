package replay

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// exportOf is the export of a recording, as kubectl baton transcript -o json writes it: each
// step's record carries the handoff record of the step before it, the status the latest ten.
func exportOf(t testing.TB, rec Recording, cfg v1alpha1.AgentConfigSpec) *records.Export {
	t.Helper()
	e := &records.Export{APIVersion: records.ExportVersion, Kind: records.ExportKind, Namespace: "ns", Run: rec.Run, UID: "u1",
		Spec:   v1alpha1.AgentRunSpec{Input: rec.Input},
		Status: *rec.End.DeepCopy(), Config: &records.PinnedConfig{Revision: rec.Revision, Spec: cfg}}
	e.Status.StartTime = nil
	if !rec.Started.IsZero() {
		start := metav1.NewMicroTime(rec.Started)
		e.Status.StartTime = &start
	}
	e.Status.HandoffSequence = rec.Path[max(0, len(rec.Path)-10):]
	seq := int64(0)
	for i, s := range rec.Steps {
		body := records.StepBody{Agent: s.Result.Agent, Input: s.Result.Input, Result: s.Result.Result}
		// The record before the step's: a fan-out's join, not the fan-out, for the step after it.
		for j := range rec.Path {
			if rec.Path[j].Step <= int32(i) {
				body.Previous = &rec.Path[j]
			}
		}
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		for j, c := range s.Calls {
			call, _ := json.Marshal(records.CallBody{Agent: s.Result.Agent, ToolCall: workflow.ToolCall{Index: int32(j + 1), Server: c.Server, Tool: c.Tool,
				Arguments: json.RawMessage(fmt.Sprintf(`{"digest":%q}`, c.Digest))}, ToolOutcome: workflow.ToolOutcome{Made: !c.Refused, Content: "ok"}})
			seq++
			e.Records = append(e.Records, records.Record{Seq: seq, Kind: transcript.KindTool, Step: int32(i + 1), Call: int32(j + 1), Time: s.Time, Body: call})
		}
		seq++
		e.Records = append(e.Records, records.Record{Seq: seq, Kind: transcript.KindStep, Step: int32(i + 1), Time: s.Time, Body: data})
	}
	for _, d := range rec.Decisions {
		data, _ := json.Marshal(records.DecisionBody{Decisions: []workflow.Decided{d}})
		seq++
		e.Records = append(e.Records, records.Record{Seq: seq, Kind: transcript.KindDecision, Time: d.Time.Time, Body: data})
	}
	for _, b := range rec.Branches {
		branch := exportOf(t, b, cfg)
		branch.Config, branch.Spec.Branch = nil, b.Branch
		e.Branches = append(e.Branches, *branch)
	}
	return e
}

func TestAnExportedFanOutReplaysWithItsBranchesAsItRan(t *testing.T) {
	c := research(2, v1alpha1.Join{})
	p := plan(t, c)
	read := readBack(t, exportOf(t, recordResearch(t, p), c.Obj().Spec))
	if r := Run(p, read, Options{}); !r.Same() || len(r.Branches) != 2 {
		t.Fatalf("the export replayed: diverged at %d, stopped %q, %d branches", r.Diverged, r.Stopped, len(r.Branches))
	}
}

func TestAnExportsBranchesAreBounded(t *testing.T) {
	leaf := func(run string) records.Export {
		return records.Export{APIVersion: records.ExportVersion, Kind: records.ExportKind, Run: run}
	}
	deep := leaf("root")
	at := &deep
	for i := range records.MaxExportDepth + 1 {
		at.Branches = []records.Export{leaf(fmt.Sprintf("b%d", i))}
		at = &at.Branches[0]
	}
	wide := leaf("root")
	for i := range records.MaxExportBranches + 1 {
		wide.Branches = append(wide.Branches, leaf(fmt.Sprintf("b%d", i)))
	}
	unnamed := leaf("root")
	unnamed.Branches = []records.Export{leaf("")}
	for name, e := range map[string]records.Export{"too deep": deep, "too many": wide, "a branch that names no run": unnamed} {
		if err := e.Check(); err == nil {
			t.Errorf("%s: checked", name)
		}
	}
}

// readBack is the recording an export is read as, written to its file and read again.
func readBack(t testing.TB, e *records.Export) Recording {
	t.Helper()
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	read, err := records.ReadExport(data)
	if err != nil {
		t.Fatalf("ReadExport: %v", err)
	}
	rec, err := FromExport(read)
	if err != nil {
		t.Fatalf("FromExport: %v", err)
	}
	return rec
}

func TestAnExportedRunReplaysAsItRan(t *testing.T) {
	c := helpdesk().Gate("refund", "billing", 1)
	p := plan(t, c)
	read := readBack(t, exportOf(t, billingTicket(t, p), c.Obj().Spec))
	if r := Run(p, read, Options{}); !r.Same() || len(r.Recorded.Path) != 6 {
		t.Fatalf("the export replayed: diverged at %d, stopped %q, recorded path %s, replayed %s",
			r.Diverged, r.Stopped, pathOf(r.Recorded.Path), pathOf(r.Replayed.Path))
	}
}

func TestAnExportThatIsNoneIsRefused(t *testing.T) {
	for name, data := range map[string]string{
		"another version": `{"apiVersion":"agents.baton.dev/transcript-v0","kind":"Transcript","run":"r"}`,
		"another kind":    `{"apiVersion":"agents.baton.dev/transcript-v1","kind":"Page","run":"r"}`,
		"no run":          `{"apiVersion":"agents.baton.dev/transcript-v1","kind":"Transcript"}`,
		"not JSON":        `apiVersion: agents.baton.dev/transcript-v1`,
	} {
		if _, err := records.ReadExport([]byte(data)); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// FuzzReplayExport holds that a replay never panics on a hostile transcript file: whatever
// ReadExport and FromExport take, Run replays on the file's own config.
func FuzzReplayExport(f *testing.F) {
	c := helpdesk().Gate("refund", "billing", 1)
	p, errs := workflow.NewPlan(c.Obj().Spec, nil)
	if len(errs) > 0 {
		f.Fatal(errs)
	}
	rec := billingTicket(f, p.ForRun("ticket", "ns", "", "alice"))
	seed, _ := json.Marshal(exportOf(f, rec, c.Obj().Spec))
	f.Add(seed)
	fan := research(2, v1alpha1.Join{})
	fp, errs := workflow.NewPlan(fan.Obj().Spec, nil)
	if len(errs) > 0 {
		f.Fatal(errs)
	}
	branched, _ := json.Marshal(exportOf(f, recordResearch(f, fp.ForRun("ticket", "ns", "", "alice")), fan.Obj().Spec))
	f.Add(branched)
	f.Add([]byte(`{"apiVersion":"agents.baton.dev/transcript-v1","kind":"Transcript","run":"r","status":{"startTime":"2026-11-25T09:00:00.000000Z"},"records":[{"kind":"step","step":1,"body":{"agent":"nobody","parallel":[{"agent":"triage"}]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := records.ReadExport(data)
		if err != nil || e.Config == nil {
			return
		}
		rec, err := FromExport(e)
		if err != nil {
			return
		}
		p, errs := workflow.NewPlan(e.Config.Spec, e.Spec.Limits)
		if len(errs) > 0 {
			return
		}
		r := Run(p.ForRun(e.Run, e.Namespace, e.Spec.Approvals, ""), rec, Options{})
		if r.Replayed.Phase == "" {
			t.Fatalf("a replay with no phase: %+v", r)
		}
	})
}

// No step's record carries a fan-out's: the recording rebuilds it from the step that fanned
// out, when the status no longer keeps it, so an early fan-out of a long run is in its path.
func TestAnEarlyFanOutIsInTheRecordedPath(t *testing.T) {
	c := research(2, v1alpha1.Join{})
	p := plan(t, c)
	e := exportOf(t, recordResearch(t, p), c.Obj().Spec)
	e.Status.HandoffSequence = e.Status.HandoffSequence[len(e.Status.HandoffSequence)-1:]
	rec := readBack(t, e)
	if got := pathOf(rec.Path); got != "lead>web,papers web,papers>writer writer>" {
		t.Fatalf("recorded path %s", got)
	}
	if r := Run(p, rec, Options{}); !r.Same() {
		t.Errorf("diverged at %d, stopped %q", r.Diverged, r.Stopped)
	}
}
