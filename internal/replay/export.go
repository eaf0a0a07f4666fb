package replay

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// FromExport reads an exported transcript as a recording: its steps (the last attempt of each),
// with the tool calls each made; people's decisions, in order; the whole handoff sequence, from
// each step's record of the one before it and the status's latest; and the run's end. A file
// may come from anywhere: what cannot be read is an error, never a panic.
func FromExport(e *records.Export) (Recording, error) {
	rec := Recording{Run: e.Run, Input: e.Spec.Input, Revision: e.Status.ConfigRevision, End: e.Status}
	if e.Spec.From != nil {
		return rec, fmt.Errorf("run %s started from step %d of run %s: replay that run", e.Run, e.Spec.From.Step, e.Spec.From.Run)
	}
	if e.Status.StartTime == nil {
		return rec, fmt.Errorf("run %s never started: there is nothing to replay", e.Run)
	}
	rec.Started = e.Status.StartTime.Time
	steps := map[int32]records.Record{}
	calls := map[int32][]workflow.RecordedCall{}
	for _, r := range e.Records {
		switch {
		case r.Step < 0:
			return rec, fmt.Errorf("record %d names step %d", r.Seq, r.Step)
		case r.Kind == transcript.KindStep:
			if last, ok := steps[r.Step]; !ok || r.Attempt >= last.Attempt {
				steps[r.Step] = r
			}
		case r.Kind == transcript.KindTool:
			calls[r.Step] = append(calls[r.Step], r.ToolCall())
		case r.Kind == transcript.KindDecision:
			rec.Decisions = append(rec.Decisions, r.Decided()...)
		}
	}
	var seen []v1alpha1.HandoffRecord
	for _, n := range slices.Sorted(maps.Keys(steps)) {
		var body records.StepBody
		if err := json.Unmarshal(steps[n].Body, &body); err != nil {
			return rec, fmt.Errorf("the record of step %d cannot be read: %w", n, err)
		}
		rec.Steps = append(rec.Steps, workflow.RecordedStep{Result: body.StepResult(), Time: steps[n].Time, Calls: calls[n]})
		if body.Previous != nil {
			seen = append(seen, *body.Previous)
		}
	}
	rec.Path = wholePath(seen, e.Status.HandoffSequence)
	return rec, nil
}

// wholePath is the run's handoff sequence: the records later steps carried, then those of the
// status's latest that come after them.
func wholePath(seen, latest []v1alpha1.HandoffRecord) []v1alpha1.HandoffRecord {
	var out []v1alpha1.HandoffRecord
	add := func(h v1alpha1.HandoffRecord) {
		if len(out) == 0 || later(h, out[len(out)-1]) {
			out = append(out, h)
		}
	}
	for _, h := range seen {
		add(h)
	}
	for _, h := range latest {
		add(h)
	}
	return out
}
