package runview

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcript"
)

// Entry is one line of a run's timeline: a step, a person's decision, or the step running now.
type Entry struct {
	Kind EntryKind
	Time time.Time
	// A step's.
	Step  int32
	Agent string
	// To is who had control after the step ("" when it ended the run); for a decision, the
	// agent a rejection sent the run back to.
	To      string
	Outcome string
	Signal  string
	Tokens  int64
	// Cost is what the step cost, as a decimal string in the run's currency: from its record,
	// else its handoff record; empty when its endpoint has no prices.
	Cost    string
	Latency time.Duration
	Reason  string
	// Text is the beginning of the step's output, or of its error.
	Text   string
	Failed bool
	Tools  []ToolEntry
	// Recorded says the transcript holds the step's record: its time and tool calls are known,
	// and the record can be read in full.
	Recorded bool
	// A decision's.
	Gate     string
	Decision string
	By       string
	Feedback string
}

// EntryKind says what an Entry is.
type EntryKind string

// The kinds of timeline entries.
const (
	EntryStep     EntryKind = "step"
	EntryDecision EntryKind = "decision"
	EntryRunning  EntryKind = "running"
)

// ToolEntry is one tool call a step made.
type ToolEntry struct {
	Name    string
	Note    string
	Failed  bool
	Latency time.Duration
}

// Bounds of the text a timeline keeps: the beginning of an output, and of a decision's
// feedback. The records have them whole.
const (
	maxText     = 300
	maxFeedback = 4096
)

// Timeline builds a run's whole timeline from its transcript records, added oldest first, and
// its status. Status holds only the latest handoffs and decisions; the records hold every step
// (each step's record carries the handoff of the step before it) and every decision. Without
// records, the timeline is what status holds. A Timeline keeps only what its entries show, so a
// reader can add a long run's records a page at a time.
type Timeline struct {
	run      *v1alpha1.AgentRun
	steps    []Entry
	handoffs map[int32]v1alpha1.HandoffRecord
	// joins are the joins of fan-outs, by the step that fanned out: a join shares its step.
	joins map[int32]v1alpha1.HandoffRecord
	tools map[int32][]ToolEntry
	// decisions are the decisions recorded, and decided their keys.
	decisions []Entry
	decided   map[string]bool
}

// NewTimeline is the timeline of run, before any record is added.
func NewTimeline(run *v1alpha1.AgentRun) *Timeline {
	return &Timeline{run: run, handoffs: map[int32]v1alpha1.HandoffRecord{}, joins: map[int32]v1alpha1.HandoffRecord{},
		tools: map[int32][]ToolEntry{}, decided: map[string]bool{}}
}

// BuildTimeline is the timeline of run with records, oldest first.
func BuildTimeline(run *v1alpha1.AgentRun, recs []records.Record) []Entry {
	t := NewTimeline(run)
	for _, r := range recs {
		t.Add(r)
	}
	return t.Entries()
}

// Add adds the next record.
func (t *Timeline) Add(r records.Record) {
	switch r.Kind {
	case transcript.KindTool:
		b := r.ToolBody()
		t.tools[r.Step] = append(t.tools[r.Step], ToolEntry{Name: b.Server + "/" + b.Tool, Note: b.Note(),
			Failed: b.IsError || b.Refused != "", Latency: time.Duration(b.LatencyMs) * time.Millisecond})
	case transcript.KindStep:
		b := r.StepBody()
		switch {
		case b.Previous == nil:
		case b.Previous.Outcome == v1alpha1.OutcomeJoined:
			t.joins[b.Previous.Step] = *b.Previous
		default:
			t.handoffs[b.Previous.Step] = *b.Previous
		}
		t.steps = append(t.steps, recordedStep(r, b))
	case transcript.KindDecision:
		for _, d := range r.DecisionBody().Decisions {
			if key := decisionKey(d.ApprovalRecord); !t.decided[key] {
				t.decided[key] = true
				// The record's time is the decision's to the microsecond; status's, to the second.
				t.decisions = append(t.decisions, decisionEntry(d.ApprovalRecord, r.Time))
			}
		}
	}
}

// recordedStep is a step's entry from its record; its handoff, when known, completes it.
func recordedStep(r records.Record, b records.StepBody) Entry {
	e := Entry{Kind: EntryStep, Time: r.Time, Step: r.Step, Agent: b.Agent, Tokens: b.Tokens, Cost: b.Cost, Recorded: true,
		Latency: time.Duration(b.LatencyMs) * time.Millisecond, Reason: b.Reason,
		Text: textbound.Line(b.Output, maxText), Outcome: b.Next(), Failed: b.Error != ""}
	if b.Error != "" {
		e.Text, e.Reason = textbound.Line(b.Error, maxText), textbound.Line(b.Error, maxText)
	}
	switch {
	case b.Routing != nil:
		e.To = b.Routing.Target
	case b.Handoff != "":
		e.To = b.Handoff
	}
	return e
}

// withHandoff is a step's entry as its handoff record says it ended.
func withHandoff(e Entry, h v1alpha1.HandoffRecord) Entry {
	e.To, e.Outcome, e.Signal, e.Reason = h.To, string(h.Outcome), h.Signal, h.Reason
	e.Failed = e.Failed || h.Outcome == v1alpha1.OutcomeFailed
	if !e.Recorded {
		e.Agent, e.Tokens, e.Time = h.From, h.Tokens, h.Time.Time
	}
	if e.Cost == "" {
		e.Cost = h.Cost
	}
	return e
}

// Entries is the timeline: steps and decisions in the order they happened, then the step
// running now, if one is.
func (t *Timeline) Entries() []Entry {
	s := t.run.Status
	latest := map[int32]v1alpha1.HandoffRecord{}
	for _, h := range s.HandoffSequence {
		if h.Outcome == v1alpha1.OutcomeJoined {
			t.joins[h.Step] = h
			continue
		}
		latest[h.Step] = h
	}
	out := make([]Entry, 0, len(t.steps)+len(s.HandoffSequence)+len(t.decisions)+1)
	seen := map[int32]bool{}
	for _, e := range t.steps {
		if h, ok := latest[e.Step]; ok {
			e = withHandoff(e, h)
		} else if h, ok := t.handoffs[e.Step]; ok {
			e = withHandoff(e, h)
		}
		seen[e.Step] = true
		out = append(out, e)
	}
	for _, h := range s.HandoffSequence {
		if !seen[h.Step] && h.Outcome != v1alpha1.OutcomeJoined {
			seen[h.Step] = true
			out = append(out, withHandoff(Entry{Kind: EntryStep, Step: h.Step}, h))
		}
	}
	// A step known only from the record of the step after it.
	for _, step := range slices.Sorted(maps.Keys(t.handoffs)) {
		if !seen[step] {
			out = append(out, withHandoff(Entry{Kind: EntryStep, Step: step}, t.handoffs[step]))
		}
	}
	for i := range out {
		out[i].Tools = t.tools[out[i].Step]
	}
	// A join: the branches' agents handed their outputs to the join agent.
	for _, step := range slices.Sorted(maps.Keys(t.joins)) {
		out = append(out, withHandoff(Entry{Kind: EntryStep, Step: step}, t.joins[step]))
	}
	out = append(out, t.decisions...)
	for _, a := range s.Approvals {
		if !t.decided[decisionKey(a)] {
			out = append(out, decisionEntry(a, a.Time.Time))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if s.Phase == v1alpha1.PhaseRunning && s.CurrentAgent != "" {
		out = append(out, Entry{Kind: EntryRunning, Step: s.StepCount + 1, Agent: s.CurrentAgent})
	}
	return out
}

func decisionEntry(a v1alpha1.ApprovalRecord, at time.Time) Entry {
	return Entry{Kind: EntryDecision, Time: at, Step: a.Step, Gate: a.Gate, Decision: a.Decision, By: a.By,
		Feedback: textbound.Line(a.Feedback, maxFeedback), To: a.Revise}
}

// decisionKey tells a decision apart from the others of its run: status and the records have
// it to the second.
func decisionKey(a v1alpha1.ApprovalRecord) string {
	return fmt.Sprintf("%s\x00%d\x00%d\x00%s\x00%s\x00%d", a.Gate, a.Step, a.ToolCall, a.Decision, a.By, a.Time.Unix())
}

// LeftOut is what a part of a timeline leaves out: the earlier steps, and the decisions made
// between them.
type LeftOut struct {
	Steps, Decisions int
}

// Latest is the part of a timeline from its nth step before the end (every entry when n is 0 or
// the run has no more steps), and what it leaves out: what kubectl baton describe and the
// console's run page show of a long run.
func Latest(entries []Entry, n int) ([]Entry, LeftOut) {
	cut, seen := 0, 0
	for i := len(entries) - 1; i >= 0 && n > 0; i-- {
		if entries[i].Kind == EntryStep {
			if seen++; seen == n {
				cut = i
				break
			}
		}
	}
	var out LeftOut
	for _, e := range entries[:cut] {
		switch e.Kind {
		case EntryStep:
			out.Steps++
		case EntryDecision:
			out.Decisions++
		}
	}
	return entries[cut:], out
}
