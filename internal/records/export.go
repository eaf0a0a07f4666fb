package records

import (
	"encoding/json"
	"fmt"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// ExportVersion is the apiVersion of a run's exported transcript: what `kubectl baton
// transcript RUN -o json` writes and `kubectl baton replay -f` reads (docs/replay.md).
const ExportVersion = "agents.baton.dev/transcript-v1"

// ExportKind is the kind of an exported transcript.
const ExportKind = "Transcript"

// Bounds of an export a replay reads: a file may come from anywhere.
const (
	// MaxExportRecords is the most records an export may hold, its branches' included.
	MaxExportRecords = 100000
	// MaxExportBranches is the most branch runs an export may hold, at every depth, and
	// MaxExportDepth how deep they may nest.
	MaxExportBranches = 256
	MaxExportDepth    = v1alpha1.MaxDepth
	// MaxExportBytes is the most bytes an export's file may have.
	MaxExportBytes = 512 << 20
)

// Export is a run's transcript with what a replay needs besides its records: the run's input,
// limits and approvals (spec), its end as its status said (status), and the config it pinned.
// The first fields are those of a page of the transcript API, so a reader of pages reads an
// export too. It holds no secret: the config names Secrets, the records never quote them.
type Export struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Run        string   `json:"run"`
	UID        string   `json:"uid"`
	Records    []Record `json:"records"`
	// Spec is the run's spec, and Status its status when it was exported (the latest handoffs
	// only: the step records carry the rest).
	Spec   v1alpha1.AgentRunSpec   `json:"spec"`
	Status v1alpha1.AgentRunStatus `json:"status"`
	// Config is the config the run pinned, as its revision holds it.
	Config *PinnedConfig `json:"config,omitempty"`
	// CreatedBy is who created the run, as the admission webhook recorded it: a replay holds
	// their approvals to the gates that forbid self-approval.
	CreatedBy string `json:"createdBy,omitempty"`
	// Branches are the exports of the run's branch runs (those its fan-outs made), each with
	// its own branches; a branch's export holds no config (it ran its root's).
	Branches []Export `json:"branches,omitempty"`
}

// PinnedConfig is the config a run pinned: its revision's name and spec.
type PinnedConfig struct {
	Revision string                   `json:"revision"`
	Spec     v1alpha1.AgentConfigSpec `json:"spec"`
}

// ExportBudget counts what an export, or a replay of a run and its branches, holds so far,
// against the bounds above.
type ExportBudget struct{ records, branches int }

// AddRecords counts n more records of run.
func (b *ExportBudget) AddRecords(run string, n int) error {
	if b.records += n; b.records > MaxExportRecords {
		return fmt.Errorf("run %s and its branches hold more than the %d records an export holds", run, MaxExportRecords)
	}
	return nil
}

// AddBranch counts a branch run of run, nested depth deep (from 1).
func (b *ExportBudget) AddBranch(run string, depth int) error {
	if b.branches++; b.branches > MaxExportBranches || depth > MaxExportDepth {
		return fmt.Errorf("run %s has more branch runs than an export holds (%d, %d deep)", run, MaxExportBranches, MaxExportDepth)
	}
	return nil
}

// Check says why an export cannot be read as one, if it cannot: another version or kind, no
// run, or more records than an export holds. What each record says is checked as it is read.
func (e *Export) Check() error {
	switch {
	case e.APIVersion != ExportVersion:
		return fmt.Errorf("apiVersion %q: want %s", e.APIVersion, ExportVersion)
	case e.Kind != ExportKind:
		return fmt.Errorf("kind %q: want %s", e.Kind, ExportKind)
	}
	return e.check(0, &ExportBudget{})
}

// check checks the export at depth, counting the records and branches of the whole export.
func (e *Export) check(depth int, budget *ExportBudget) error {
	if e.Run == "" {
		return fmt.Errorf("the export names no run")
	}
	if err := budget.AddRecords(e.Run, len(e.Records)); err != nil {
		return err
	}
	for i := range e.Branches {
		if err := budget.AddBranch(e.Run, depth+1); err != nil {
			return err
		}
		if err := e.Branches[i].check(depth+1, budget); err != nil {
			return fmt.Errorf("branch %s: %w", e.Branches[i].Run, err)
		}
	}
	return nil
}

// ReadExport reads an export from its JSON.
func ReadExport(data []byte) (*Export, error) {
	if len(data) > MaxExportBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d an export may have", len(data), MaxExportBytes)
	}
	e := &Export{}
	if err := json.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("reading the export: %w", err)
	}
	if err := e.Check(); err != nil {
		return nil, err
	}
	return e, nil
}

// ToolCall is a tool record as a replay judges it: which tool, whether the call was refused, and
// who approved it at its gate.
func (r Record) ToolCall() workflow.RecordedCall {
	var b CallBody
	_ = json.Unmarshal(r.Body, &b)
	return b.Recorded(r.Step)
}

// Recorded is the call as a replay judges it, made at step.
func (b CallBody) Recorded(step int32) workflow.RecordedCall {
	use := workflow.UseOf(step, b.ToolCall)
	return workflow.RecordedCall{Server: b.Server, Tool: b.Tool, Digest: use.Digest, Malformed: use.Malformed,
		Refused: b.Refused != "", Refusal: refusalOf(b), ApprovedBy: b.ApprovedBy, Taint: b.Taint}
}

// refusalOf is why a call was not made: as its record says, or, in a record written before
// the reason was kept, as its words say.
func refusalOf(b CallBody) workflow.Refusal {
	if b.Refused == "" || b.Refusal != "" {
		return b.Refusal
	}
	return workflow.RefusalOf(b.Refused)
}

// Decided is what a decision record says people decided. Records written before decisions were
// kept whole hold only replies, in their context.
func (r Record) Decided() []workflow.Decided {
	var body DecisionBody
	if json.Unmarshal(r.Body, &body) != nil {
		return nil
	}
	if len(body.Decisions) > 0 {
		return body.Decisions
	}
	var out []workflow.Decided
	for _, c := range body.Context {
		if c.Kind == workflow.ContextReply {
			out = append(out, workflow.Decided{ApprovalRecord: v1alpha1.ApprovalRecord{Decision: v1alpha1.RecordReplied, By: c.From}, Reply: c.Text})
		}
	}
	return out
}
