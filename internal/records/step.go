package records

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// StepBody is a step's record: everything the agent was given and everything it answered, in full.
type StepBody struct {
	Agent    string                 `json:"agent"`
	Provider v1alpha1.ModelProvider `json:"provider"`
	Model    string                 `json:"model,omitempty"`
	// Input is what the agent was given for the step.
	Input string `json:"input"`
	// Messages are the chat messages a model provider was sent, in order.
	Messages []workflow.Message `json:"messages,omitempty"`
	// Result is what the agent answered: output, handoff, signal, routing, tokens, tool calls.
	workflow.Result
	Error    string `json:"error,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	// Guard are the guardrails' verdicts on the step's input and output.
	Guard []GuardVerdict `json:"guard,omitempty"`
	// UnavailableTools names the tool servers that could not be listed for the step.
	UnavailableTools []string `json:"unavailableTools,omitempty"`
	// Context is what the step adds to what later agents see; the entry that is the step's
	// output keeps no text of its own, so that the output is stored once (Entries puts it back).
	Context []StoredEntry `json:"context,omitempty"`
	// ToolRecordBytes is what the step's tool records take in the transcript.
	ToolRecordBytes int64 `json:"toolRecordBytes,omitempty"`
	// Previous is the handoff record of the step before, as the run had it when this step
	// started: with status's latest ones, the records give every step's handoff, and the loop
	// detectors' history outlives status's short one.
	Previous *v1alpha1.HandoffRecord `json:"previous,omitempty"`

	Started   time.Time `json:"started"`
	LatencyMs int64     `json:"latencyMs"`
}

// NewStep is the record body of a step that ended with res, what it adds to later agents'
// context, from started to ended.
func NewStep(res workflow.StepResult, spec *v1alpha1.Agent, context []workflow.ContextEntry, started, ended time.Time) StepBody {
	return StepBody{
		Agent: res.Agent, Provider: spec.Model.Provider, Model: spec.Model.Name, Input: res.Input,
		Result: res.Result, Error: res.Error, TimedOut: res.TimedOut,
		Context: storedContext(context, res.Output), Started: started.UTC(), LatencyMs: ended.Sub(started).Milliseconds(),
	}
}

// Record is the step's record.
func (b StepBody) Record(run RunID, step int32, ended time.Time) transcript.Record {
	return run.Record(transcript.Key{Kind: transcript.KindStep, Step: step}, ended, transcript.Body(b))
}

// StepResult is the step's result as the workflow core applies it.
func (b StepBody) StepResult() workflow.StepResult {
	return workflow.StepResult{Agent: b.Agent, Input: b.Input, Error: b.Error, TimedOut: b.TimedOut, Result: b.Result}
}

// StoredEntry is a context entry as a step's record keeps it: one that repeats the step's
// output (OfOutput) has no text of its own.
type StoredEntry struct {
	workflow.ContextEntry
	OfOutput bool `json:"ofOutput,omitempty"`
}

// storedContext is a step's context entries as its record keeps them.
func storedContext(entries []workflow.ContextEntry, output string) []StoredEntry {
	out := make([]StoredEntry, len(entries))
	for i, e := range entries {
		out[i].ContextEntry = e
		if e.Text == output && output != "" {
			out[i].Text, out[i].OfOutput = "", true
		}
	}
	return out
}

// Entries is what the step adds to later agents' context, whole.
func (b StepBody) Entries() []workflow.ContextEntry {
	out := make([]workflow.ContextEntry, len(b.Context))
	for i, e := range b.Context {
		out[i] = e.ContextEntry
		if e.OfOutput {
			out[i].Text = b.Output
		}
	}
	return out
}

// Next says in words what a step asked for.
func (b StepBody) Next() string {
	switch {
	case b.Error != "":
		return "failed"
	case b.Routing != nil:
		s := "route to " + b.Routing.Target
		if b.Routing.Confidence != nil {
			s += fmt.Sprintf(" (confidence %.2f)", *b.Routing.Confidence)
		}
		return s + prefixed(": ", b.Routing.Reason)
	case b.Handoff != "":
		return "hand off to " + b.Handoff + prefixed(": ", b.Reason)
	case b.Signal != "":
		return "signal " + b.Signal
	case b.FinishReason == v1alpha1.FinishLength:
		return "cut at the output-token limit"
	}
	return "answer"
}

// ResultOf reads a step's record, or the record of a step held at a tool's gate, back into the
// result the workflow core applies. The result counts what its records take of the run's
// transcript budget.
func ResultOf(rec transcript.Record) (workflow.StepResult, error) {
	if rec.Kind == transcript.KindToolGate || rec.Kind == transcript.KindGuardGate {
		var b HeldBody
		if err := json.Unmarshal(rec.Body, &b); err != nil {
			return workflow.StepResult{}, fmt.Errorf("the transcript's record of step %d held at a gate cannot be read: %w", rec.Step, err)
		}
		return b.StepResult(), nil
	}
	var b StepBody
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		return workflow.StepResult{}, fmt.Errorf("the transcript's record of step %d cannot be read: %w", rec.Step, err)
	}
	res := b.StepResult()
	res.RecordBytes = int64(len(rec.Body)) + b.ToolRecordBytes
	return res, nil
}

// ContextOf is what a step's or a decision's record adds to later agents' context.
func ContextOf(rec transcript.Record) []workflow.ContextEntry {
	if rec.Kind == transcript.KindHistory {
		b, err := HistoryOf(rec)
		if err != nil {
			return nil
		}
		return b.Entries()
	}
	if rec.Kind == transcript.KindStep {
		var b StepBody
		if json.Unmarshal(rec.Body, &b) != nil {
			return nil
		}
		return b.Entries()
	}
	var b DecisionBody
	if json.Unmarshal(rec.Body, &b) != nil {
		return nil
	}
	return b.Context
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// LastOutput is what a run's last recorded step answered, in full; found is false while the run
// has recorded no step.
func LastOutput(ctx context.Context, store transcript.Store, runUID string) (output string, found bool, err error) {
	recs, err := store.List(ctx, transcript.Query{RunUID: runUID, Kinds: []transcript.Kind{transcript.KindStep},
		Limit: 1, Newest: true, MaxBytes: ReadPage})
	if err != nil || len(recs) == 0 {
		return "", false, err
	}
	var b StepBody
	if err := json.Unmarshal(recs[0].Body, &b); err != nil {
		return "", false, err
	}
	return b.Output, true, nil
}
