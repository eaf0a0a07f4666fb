package console

import (
	"sort"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/transcriptapi"
)

// Entry is one line of a run's timeline: a step, a person's decision, the gate the run waits
// at, or the step running now.
type Entry struct {
	Kind EntryKind
	Time time.Time
	// A step's.
	Step     int32
	Agent    string
	To       string
	Outcome  string
	Tokens   int64
	Latency  time.Duration
	Reason   string
	Text     string
	Failed   bool
	Tools    []ToolEntry
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

// maxText bounds the text a timeline line shows of an output; the step's page has it all.
const maxText = 300

// timeline is a run's steps and decisions in order. The transcript gives every step with its
// latency and tool calls; status alone gives the steps it still holds, so a console that cannot
// reach the transcript API still shows a timeline.
func timeline(run *v1alpha1.AgentRun, records []transcriptapi.Record) []Entry {
	s := run.Status
	byStep := map[int32]v1alpha1.HandoffRecord{}
	for _, h := range s.HandoffSequence {
		byStep[h.Step] = h
	}
	tools := map[int32][]ToolEntry{}
	var out []Entry
	seen := map[int32]bool{}
	for _, r := range records {
		switch {
		case r.Kind == "tool":
			b := r.ToolBody()
			tools[r.Step] = append(tools[r.Step], ToolEntry{Name: b.Server + "/" + b.Tool, Note: b.Note(),
				Failed: b.IsError || b.Refused != "", Latency: time.Duration(b.LatencyMs) * time.Millisecond})
		case r.Kind == "step":
			b := r.StepBody()
			e := Entry{Kind: EntryStep, Time: r.Time, Step: r.Step, Agent: b.Agent, Tokens: b.Tokens, Recorded: true,
				Latency: time.Duration(b.LatencyMs) * time.Millisecond, Reason: b.Reason, Text: clip(b.Output, maxText),
				Outcome: b.Next(), Failed: b.Error != ""}
			if b.Error != "" {
				e.Text = clip(b.Error, maxText)
			}
			switch {
			case b.Routing != nil:
				e.To = b.Routing.Target
			case b.Handoff != "":
				e.To = b.Handoff
			}
			if h, ok := byStep[r.Step]; ok {
				e.To, e.Outcome = h.To, string(h.Outcome)
				if h.Signal != "" {
					e.Outcome += " (" + h.Signal + ")"
				}
			}
			seen[r.Step] = true
			out = append(out, e)
		}
	}
	for _, h := range s.HandoffSequence {
		if seen[h.Step] {
			continue
		}
		outcome := string(h.Outcome)
		if h.Signal != "" {
			outcome += " (" + h.Signal + ")"
		}
		out = append(out, Entry{Kind: EntryStep, Time: h.Time.Time, Step: h.Step, Agent: h.From, To: h.To, Outcome: outcome,
			Tokens: h.Tokens, Reason: h.Reason, Failed: h.Outcome == v1alpha1.OutcomeFailed})
	}
	for i := range out {
		out[i].Tools = tools[out[i].Step]
	}
	for _, a := range s.Approvals {
		out = append(out, Entry{Kind: EntryDecision, Time: a.Time.Time, Step: a.Step, Gate: a.Gate, Decision: a.Decision,
			By: a.By, Feedback: a.Feedback, To: a.Revise})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if s.Phase == v1alpha1.PhaseRunning && s.CurrentAgent != "" {
		out = append(out, Entry{Kind: EntryRunning, Step: s.StepCount + 1, Agent: s.CurrentAgent})
	}
	return out
}

// lastOutput is what there is to judge at the gate the run waits at: the output of the step
// before it.
func lastOutput(run *v1alpha1.AgentRun, records []transcriptapi.Record) string {
	for i := len(records) - 1; i >= 0; i-- {
		if records[i].Kind == "step" {
			if b := records[i].StepBody(); b.Error == "" {
				return b.Output
			}
		}
	}
	if p := run.Status.PendingApproval; p != nil && p.Completes != nil {
		return run.Status.Output
	}
	return run.Status.Input
}

// clip shortens s to n characters, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
