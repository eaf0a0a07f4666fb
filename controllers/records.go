package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/agents"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// stepBody is a step's record in the transcript: everything the agent was given and everything
// it answered, in full. docs/transcript.md documents it for readers.
type stepBody struct {
	Agent    string                 `json:"agent"`
	Provider v1alpha1.ModelProvider `json:"provider"`
	Model    string                 `json:"model,omitempty"`
	// Input is what the agent was given for the step.
	Input string `json:"input"`
	// Messages are the chat messages a model provider was sent, in order.
	Messages []agents.Message `json:"messages,omitempty"`

	Output       string                    `json:"output"`
	Handoff      string                    `json:"handoff,omitempty"`
	Reason       string                    `json:"reason,omitempty"`
	Signal       string                    `json:"signal,omitempty"`
	Routing      *v1alpha1.RoutingDecision `json:"routing,omitempty"`
	FinishReason v1alpha1.FinishReason     `json:"finishReason,omitempty"`
	// Tokens is the usage the step reported, InputTokens the part of it that was prompts.
	Tokens      int64    `json:"tokens"`
	InputTokens int64    `json:"inputTokens,omitempty"`
	Ignored     []string `json:"ignoredToolCalls,omitempty"`
	Error       string   `json:"error,omitempty"`
	TimedOut    bool     `json:"timedOut,omitempty"`
	// ToolCalls is the step's tool calls (each has records of its own), CountedToolCalls
	// those counted while the step was held at gates.
	CountedTokens      int64              `json:"countedTokens,omitempty"`
	CountedInputTokens int64              `json:"countedInputTokens,omitempty"`
	ToolCalls          int32              `json:"metrics.ToolCalls,omitempty"`
	CountedToolCalls   int32              `json:"countedToolCalls,omitempty"`
	Trip               *workflow.ToolTrip `json:"trip,omitempty"`
	// UnavailableTools names the tool servers that could not be listed for the step.
	UnavailableTools []string `json:"unavailableTools,omitempty"`
	// Context is what the step adds to what later agents see; the entry that is the step's
	// output keeps no text of its own, so that the output is stored once.
	Context []storedEntry `json:"context,omitempty"`
	// ToolRecordBytes is what the step's tool records take in the transcript.
	ToolRecordBytes int64 `json:"toolRecordBytes,omitempty"`
	// Previous is the handoff record of the step before, as the run had it when this step
	// started: the loop detectors' history outlives status's short one (history.go).
	Previous *v1alpha1.HandoffRecord `json:"previous,omitempty"`

	Started   time.Time `json:"started"`
	LatencyMs int64     `json:"latencyMs"`
}

// stepRecord is the transcript record of a step that ended.
// Without req, the record holds no messages. toolBytes is what the step's tool records take.
func stepRecord(run runID, step workflow.Step, spec *v1alpha1.Agent, req *agents.Request,
	res workflow.StepResult, context []workflow.ContextEntry, unavailable []string, previous *v1alpha1.HandoffRecord, started, ended time.Time, toolBytes int64) transcript.Record {
	body := stepBody{Previous: previous,
		Agent: res.Agent, Provider: spec.Model.Provider, Model: spec.Model.Name, Input: res.Input,
		Output: res.Output, Handoff: res.Handoff, Reason: res.Reason, Signal: res.Signal, Routing: res.Routing,
		FinishReason: res.FinishReason, Tokens: res.Tokens, Ignored: res.Ignored, Error: res.Error, TimedOut: res.TimedOut,
		InputTokens: res.InputTokens, CountedTokens: res.CountedTokens, CountedInputTokens: res.CountedInputTokens, ToolCalls: res.ToolCalls, CountedToolCalls: res.CountedToolCalls, Trip: res.Trip, UnavailableTools: unavailable,
		Started: started.UTC(), LatencyMs: ended.Sub(started).Milliseconds(), Context: storedContext(context, res.Output),
	}
	if req != nil && !scripted(spec) {
		body.Messages = agents.Messages(*req)
	}
	body.ToolRecordBytes = toolBytes
	return run.record(transcript.Key{Kind: transcript.KindStep, Step: step.Number}, ended, transcript.Body(body))
}

// storedEntry is a context entry as a step's record keeps it: one that repeats the step's
// output (OfOutput) has no text of its own.
type storedEntry struct {
	workflow.ContextEntry
	OfOutput bool `json:"ofOutput,omitempty"`
}

// storedContext is a step's context entries as its record keeps them.
func storedContext(entries []workflow.ContextEntry, output string) []storedEntry {
	out := make([]storedEntry, len(entries))
	for i, e := range entries {
		out[i].ContextEntry = e
		if e.Text == output && output != "" {
			out[i].Text, out[i].OfOutput = "", true
		}
	}
	return out
}

// context is what the step adds to later agents' context, whole.
func (b stepBody) context() []workflow.ContextEntry {
	out := make([]workflow.ContextEntry, len(b.Context))
	for i, e := range b.Context {
		out[i] = e.ContextEntry
		if e.OfOutput {
			out[i].Text = b.Output
		}
	}
	return out
}

// resultOf reads a step's record, or the record of a step held at a tool's gate, back into the
// result the workflow core applies.
func resultOf(rec transcript.Record) (workflow.StepResult, error) {
	if rec.Kind == transcript.KindToolGate {
		return heldResultOf(rec)
	}
	return stepResultOf(rec)
}

// stepResultOf reads a step's record back into the result the workflow core applies.
func stepResultOf(rec transcript.Record) (workflow.StepResult, error) {
	var b stepBody
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		return workflow.StepResult{}, fmt.Errorf("the transcript's record of step %d cannot be read: %w", rec.Step, err)
	}
	res := b.result()
	// The step's record and its tool records are what the step takes of the run's transcript
	// budget.
	res.RecordBytes = int64(len(rec.Body)) + b.ToolRecordBytes
	return res, nil
}

// result is the step's result as the workflow core applies it.
func (b stepBody) result() workflow.StepResult {
	return workflow.StepResult{
		Agent: b.Agent, Input: b.Input, Error: b.Error, TimedOut: b.TimedOut,
		Result: workflow.Result{Output: b.Output, Handoff: b.Handoff, Reason: b.Reason, Signal: b.Signal, Tokens: b.Tokens,
			FinishReason: b.FinishReason, Routing: b.Routing, Ignored: b.Ignored,
			InputTokens: b.InputTokens, CountedTokens: b.CountedTokens, CountedInputTokens: b.CountedInputTokens,
			ToolCalls: b.ToolCalls, CountedToolCalls: b.CountedToolCalls, Trip: b.Trip},
	}
}

// scripted reports whether the agent plays a script: it is sent no messages and reads no
// context.
func scripted(a *v1alpha1.Agent) bool {
	return a.Model.Provider == v1alpha1.ProviderScripted || a.Model.Provider == ""
}

// contextOf is what a step's or a decision's record adds to later agents' context.
func contextOf(rec transcript.Record) []workflow.ContextEntry {
	if rec.Kind == transcript.KindStep {
		var body stepBody
		if json.Unmarshal(rec.Body, &body) != nil {
			return nil
		}
		return body.context()
	}
	var body decisionBody
	if json.Unmarshal(rec.Body, &body) != nil {
		return nil
	}
	return body.Context
}

// decisionBody is the record of people's decisions that a status write applies: who decided
// what (and gates' timeouts), and the feedback and replies that add to what later agents see,
// in full.
type decisionBody struct {
	// Decisions are the decisions applied, in order.
	Decisions []workflow.Decided      `json:"decisions,omitempty"`
	Context   []workflow.ContextEntry `json:"context"`
	// Input is the next agent's whole input as the decisions left it, when status holds only its
	// beginning.
	Input string `json:"input,omitempty"`
}

// decisionRecord is the transcript record of the decisions a status write applies. People's
// decisions are keyed by the last one's number; a write that applies only a gate's timeout, by
// the gate, since no decision of a person numbers it.
func decisionRecord(run *v1alpha1.AgentRun, st v1alpha1.AgentRunStatus, d workflow.Update, input string, now time.Time) transcript.Record {
	data := transcript.Body(decisionBody{Decisions: d.Decided, Context: d.Context, Input: input})
	key := decisionKey(&st)
	if len(d.Decided) > 0 && !byPeople(d.Decided) {
		key.Attempt = timeoutKey(d.Decided[0])
	}
	return transcript.Record{Key: key, RunUID: string(run.UID), Namespace: run.Namespace, Run: run.Name, Time: now.UTC(), Body: data}
}

// byPeople reports whether a person made any of the decisions.
func byPeople(decided []workflow.Decided) bool {
	for _, d := range decided {
		if d.By != v1alpha1.ByTimeout {
			return true
		}
	}
	return false
}

// timeoutKey tells apart the timeouts of the gates a run passes between two of people's
// decisions at one step: a gate times out at most once there, and a tool's gate once per call.
func timeoutKey(d workflow.Decided) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(d.Gate))
	return 1 + int32((h.Sum32()^uint32(d.ToolCall)*2654435761)>>2)
}

// readPage bounds the bodies one read of a run's transcript holds: whoever reads a whole run
// (a run started from it, the tool calls counted after a restart) reads a page at a time,
// however long the run.
const readPage = 4 << 20

// eachRecord calls each with the records q selects, in order, reading a page at a time, until
// each says to stop.
func eachRecord(ctx context.Context, store transcript.Store, q transcript.Query, each func(transcript.Record) (bool, error)) error {
	q.Limit, q.MaxBytes = 1000, readPage
	for {
		recs, err := store.List(ctx, q)
		if err != nil {
			return err
		}
		for i := range recs {
			more, err := each(recs[i])
			if err != nil || !more {
				return err
			}
			recs[i].Body = nil // what was read goes as it is used
		}
		if len(recs) == 0 {
			return nil
		}
		q.After = recs[len(recs)-1].Seq
	}
}
