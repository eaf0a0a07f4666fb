package replay

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// FromExport reads an exported transcript as a recording (Builder), with its branch runs'. A
// file may come from anywhere: what cannot be read is an error, never a panic.
func FromExport(e *records.Export) (Recording, error) {
	b, err := NewBuilder(e.Run, e.Spec, e.Status)
	if err != nil {
		return Recording{}, err
	}
	b.ToolResults = true
	for _, r := range e.Records {
		if err := b.Add(r); err != nil {
			return Recording{}, err
		}
	}
	rec := b.Recording()
	for i := range e.Branches {
		branch, err := FromExport(&e.Branches[i])
		if err != nil {
			return Recording{}, fmt.Errorf("branch %s: %w", e.Branches[i].Run, err)
		}
		if branch.Branch == nil {
			return Recording{}, fmt.Errorf("branch %s is no branch run: it has no spec.branch", e.Branches[i].Run)
		}
		rec.Branches = append(rec.Branches, branch)
	}
	return rec, nil
}

// Builder puts a recording together from a run's records, added in the transcript's order, a
// page at a time if need be: it keeps of each only what a replay reads. Its steps are the last
// attempt of each, with the tool calls each made; its decisions people's, in order; its path
// the whole handoff sequence, from each step's record of the one before it and the status's
// latest.
type Builder struct {
	// ToolResults keeps the results of the tool calls made, for turns answered live.
	ToolResults bool
	// Reload, when set, reads a step's record back by its key: the builder then
	// keeps of each step only what orders the turns (its agent, time, latency and calls), and
	// the recording reads the rest back with it when the replay takes the step's turn
	// (Recording.Load). So what a replay holds of a run is its digests, paths, counts and
	// ends, whatever its agents said, and one step's record at a time.
	Reload func(transcript.Key) (records.Record, error)

	rec    Recording
	steps  map[int32]builtStep
	calls  map[int32][]workflow.RecordedCall
	turns  map[int32]*turnUse
	latest []v1alpha1.HandoffRecord
}

// turnUse is what a step's model turns used, as far as the builder has read them, and how much
// of it came before each call.
type turnUse struct {
	tokens, inputTokens int64
	before              map[int32][2]int64
}

// builtStep is a step as the builder keeps it: with Reload, its result holds only its agent,
// and fanOut the record of its fan-out, if it fanned out.
type builtStep struct {
	key      transcript.Key
	step     workflow.RecordedStep
	previous *v1alpha1.HandoffRecord
	fanOut   *v1alpha1.HandoffRecord
}

// NewBuilder starts the recording of run, whose spec and status (at its end) are these.
func NewBuilder(run string, spec v1alpha1.AgentRunSpec, status v1alpha1.AgentRunStatus) (*Builder, error) {
	if spec.From != nil {
		return nil, fmt.Errorf("run %s started from step %d of run %s: replay that run", run, spec.From.Step, spec.From.Run)
	}
	if status.StartTime == nil && spec.Branch == nil {
		return nil, fmt.Errorf("run %s never started: there is nothing to replay", run)
	}
	b := &Builder{steps: map[int32]builtStep{}, calls: map[int32][]workflow.RecordedCall{}, turns: map[int32]*turnUse{}, latest: status.HandoffSequence}
	b.rec = Recording{Run: run, Input: spec.Input, Revision: status.ConfigRevision, End: status, Branch: spec.Branch}
	// A branch run cancelled before it started has a recording with no start: its fan-out's
	// replay takes it for cancelled.
	if status.StartTime != nil {
		b.rec.Started = status.StartTime.Time
	}
	return b, nil
}

// Add adds the next record.
func (b *Builder) Add(r records.Record) error {
	switch {
	case r.Step < 0:
		return fmt.Errorf("record %d names step %d", r.Seq, r.Step)
	case r.Kind == transcript.KindStep:
		if last, ok := b.steps[r.Step]; ok && r.Attempt < last.key.Attempt {
			return nil
		}
		body, res, err := stepOf(r)
		if err != nil {
			return err
		}
		latency := time.Duration(max(body.LatencyMs, 0)) * time.Millisecond
		key := transcript.Key{Kind: r.Kind, Step: r.Step, Attempt: r.Attempt, Call: r.Call}
		s := builtStep{key: key, step: workflow.RecordedStep{Result: res, Time: r.Time, Latency: latency}, previous: body.Previous}
		if len(res.Parallel) > 0 && res.Error == "" {
			f := workflow.FanOutRecord(r.Step, res, r.Time)
			s.fanOut = &f
		}
		if b.Reload != nil {
			s.step.Result = workflow.StepResult{Agent: res.Agent}
		}
		b.steps[r.Step] = s
	case r.Kind == transcript.KindToolTurn:
		b.addTurn(r)
	case r.Kind == transcript.KindTool:
		b.addCall(r)
	case r.Kind == transcript.KindDecision:
		b.rec.Decisions = append(b.rec.Decisions, r.Decided()...)
	}
	return nil
}

// stepOf reads a step's record as the replay applies it: the replayed step's input is the
// replayed run's, not the recorded one.
func stepOf(r records.Record) (records.StepBody, workflow.StepResult, error) {
	var body records.StepBody
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return body, workflow.StepResult{}, fmt.Errorf("the record of step %d cannot be read: %w", r.Step, err)
	}
	res := body.StepResult()
	res.Input = ""
	return body, res, nil
}

// addTurn adds what a model turn of a step used, and notes it for the calls the turn asked for.
func (b *Builder) addTurn(r records.Record) {
	var body records.TurnBody
	if json.Unmarshal(r.Body, &body) != nil {
		return
	}
	u := b.turns[r.Step]
	if u == nil {
		u = &turnUse{before: map[int32][2]int64{}}
		b.turns[r.Step] = u
	}
	u.tokens += max(body.Tokens, 0)
	u.inputTokens += max(body.InputTokens, 0)
	for _, c := range body.Calls {
		if len(u.before) < maxCallsKept {
			u.before[c.Index] = [2]int64{u.tokens, u.inputTokens}
		}
	}
}

// maxCallsKept bounds the calls of one step whose use the builder keeps.
const maxCallsKept = 4096

// addCall adds a tool record's call to its step, with what the step's turns used before it,
// and keeps its result, if the call was made and the builder keeps results.
func (b *Builder) addCall(r records.Record) {
	var body records.CallBody
	readable := json.Unmarshal(r.Body, &body) == nil
	call := body.Recorded(r.Step)
	if u := b.turns[r.Step]; u != nil && readable {
		used := u.before[body.Index]
		call.Tokens, call.InputTokens = used[0], used[1]
	}
	b.calls[r.Step] = append(b.calls[r.Step], call)
	if b.ToolResults && readable && body.Refused == "" {
		b.rec.ToolResults = append(b.rec.ToolResults, ToolResult{Agent: body.Agent, Call: body.ToolCall, Outcome: body.ToolOutcome, ApprovedBy: body.ApprovedBy, Taint: body.Taint})
	}
}

// Recording is the recording of what was added.
func (b *Builder) Recording() Recording {
	rec := b.rec
	var seen, fanOuts []v1alpha1.HandoffRecord
	var keys []transcript.Key
	for _, n := range slices.Sorted(maps.Keys(b.steps)) {
		s := b.steps[n]
		s.step.Calls = b.calls[n]
		rec.Steps = append(rec.Steps, s.step)
		keys = append(keys, s.key)
		if s.previous != nil {
			seen = append(seen, *s.previous)
		}
		if s.fanOut != nil {
			fanOuts = append(fanOuts, *s.fanOut)
		}
	}
	rec.Path = wholePath(seen, b.latest, fanOuts)
	if reload := b.Reload; reload != nil {
		rec.Load = func(i int) (workflow.StepResult, error) {
			r, err := reload(keys[i])
			if err != nil {
				return workflow.StepResult{}, err
			}
			_, res, err := stepOf(r)
			return res, err
		}
	}
	return rec
}

// wholePath is the run's handoff sequence: the records later steps carried and those of the
// status's latest, once each, in the run's order. A fan-out's record is carried by no step
// (the next step carries its join, which shares its step): fanOuts are rebuilt from the steps
// that asked for branches, and a step's is kept when its join, or the status, says it fanned
// out (a refused fan-out is a failed step, carried as such).
func wholePath(seen, latest, fanOuts []v1alpha1.HandoffRecord) []v1alpha1.HandoffRecord {
	all := append(slices.Clone(seen), latest...)
	for _, f := range fanOuts {
		if slices.ContainsFunc(all, func(h v1alpha1.HandoffRecord) bool { return h.Step == f.Step && h.Outcome == v1alpha1.OutcomeJoined }) {
			all = append(all, f)
		}
	}
	slices.SortStableFunc(all, func(a, b v1alpha1.HandoffRecord) int {
		switch {
		case workflow.RecordAfter(a, b):
			return 1
		case workflow.RecordAfter(b, a):
			return -1
		}
		return 0
	})
	return appendLater(nil, all)
}
