package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/agents"
	"github.com/baton-dev/baton/internal/telemetry"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// The transcript records of tool calls (docs/transcript.md documents them for readers). A
// step's tool loop writes, in order: a tool-turn record for each answer of the model that asks
// for calls, before any call is made; a tool-start record before each call of a tool with side
// effects; a tool record with each call's outcome. A step held at a tool's gate ends, for now,
// with a tool-gate record. Records are keyed by step and by turn or call number, so a step that
// runs again (after a gate, or in an operator that restarted) finds what it already did.

// turnBody is a tool-turn record.
type turnBody struct {
	Agent       string              `json:"agent"`
	Text        string              `json:"text,omitempty"`
	Tokens      int64               `json:"tokens,omitempty"`
	InputTokens int64               `json:"inputTokens,omitempty"`
	Calls       []workflow.ToolCall `json:"calls"`
}

// startBody is a tool-start record.
type startBody struct {
	Server         string `json:"server"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// callBody is a tool record: one call's outcome.
type callBody struct {
	Agent string `json:"agent"`
	workflow.ToolCall
	agents.ToolOutcome
	// Structured is the tool's structured result, when it gave one.
	Structured json.RawMessage `json:"structured,omitempty"`
	// Refused says why a call was not made: rejected at its gate, not allowed, past a limit.
	Refused        string    `json:"refused,omitempty"`
	ApprovedBy     []string  `json:"approvedBy,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	Started        time.Time `json:"started"`
	LatencyMs      int64     `json:"latencyMs"`
}

// heldBody is a tool-gate record: the step held at a call, and what it used until then.
type heldBody struct {
	Agent              string            `json:"agent"`
	Input              string            `json:"input"`
	Gate               string            `json:"gate"`
	Call               workflow.ToolCall `json:"call"`
	Tokens             int64             `json:"tokens"`
	CountedTokens      int64             `json:"countedTokens"`
	InputTokens        int64             `json:"inputTokens,omitempty"`
	CountedInputTokens int64             `json:"countedInputTokens,omitempty"`
	ToolCalls          int32             `json:"metrics.ToolCalls"`
	CountedToolCalls   int32             `json:"countedToolCalls"`
}

// heldRecord is the record of a step held at a tool's gate.
func heldRecord(run runID, step int32, res workflow.StepResult, ended time.Time) transcript.Record {
	data := transcript.Body(heldBody{Agent: res.Agent, Input: res.Input, Gate: res.Held.Gate, Call: res.Held.Call,
		Tokens: res.Tokens, CountedTokens: res.CountedTokens, InputTokens: res.InputTokens, CountedInputTokens: res.CountedInputTokens,
		ToolCalls: res.ToolCalls, CountedToolCalls: res.CountedToolCalls})
	return run.record(transcript.Key{Kind: transcript.KindToolGate, Step: step, Call: res.Held.Call.Index}, ended, data)
}

// heldResultOf reads a tool-gate record back into the result the workflow core applies.
func heldResultOf(rec transcript.Record) (workflow.StepResult, error) {
	var b heldBody
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		return workflow.StepResult{}, fmt.Errorf("the transcript's record of step %d held at a gate cannot be read: %w", rec.Step, err)
	}
	return workflow.StepResult{Agent: b.Agent, Input: b.Input, Result: workflow.Result{
		Tokens: b.Tokens, CountedTokens: b.CountedTokens, InputTokens: b.InputTokens, CountedInputTokens: b.CountedInputTokens,
		ToolCalls: b.ToolCalls, CountedToolCalls: b.CountedToolCalls,
		Held: &workflow.Held{Gate: b.Gate, Call: b.Call},
	}}, nil
}

// runID names a run in its transcript records.
type runID struct {
	uid, namespace, name string
}

// key is the run's namespace and name.
func (r runID) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.namespace, Name: r.name}
}

// traced is what the run's spans say about it.
func (r runID) traced(config string) telemetry.Run {
	return telemetry.Run{UID: r.uid, Name: r.name, Namespace: r.namespace, Config: config}
}

func (r runID) record(key transcript.Key, at time.Time, body []byte) transcript.Record {
	return transcript.Record{Key: key, RunUID: r.uid, Namespace: r.namespace, Run: r.name, Time: at.UTC(), Body: body}
}

// stepProgress reads what a step already did from its tool records: its turns with their calls'
// outcomes, and what gates it was held at counted.
func stepProgress(ctx context.Context, store transcript.Store, runUID string, step int32) (agents.Progress, []callBody, int64, error) {
	recs, err := store.List(ctx, transcript.Query{RunUID: runUID, Step: &step,
		Kinds: []transcript.Kind{transcript.KindToolTurn, transcript.KindTool, transcript.KindToolGate}})
	if err != nil {
		return agents.Progress{}, nil, 0, fmt.Errorf("reading step %d's tool calls from the transcript: %w", step, err)
	}
	var size int64
	for _, rec := range recs {
		size += int64(len(rec.Body))
	}
	var p agents.Progress
	var turns []agents.Turn
	outcomes := map[int32]callBody{}
	for _, rec := range recs {
		switch rec.Kind {
		case transcript.KindToolTurn:
			var b turnBody
			if err := json.Unmarshal(rec.Body, &b); err != nil {
				return p, nil, 0, fmt.Errorf("reading step %d's turn %d from the transcript: %w", step, rec.Call, err)
			}
			turns = append(turns, agents.Turn{Number: rec.Call, Text: b.Text, Tokens: b.Tokens, InputTokens: b.InputTokens, Calls: b.Calls})
		case transcript.KindTool:
			var b callBody
			if err := json.Unmarshal(rec.Body, &b); err != nil {
				return p, nil, 0, fmt.Errorf("reading step %d's call %d from the transcript: %w", step, rec.Call, err)
			}
			outcomes[rec.Call] = b
		case transcript.KindToolGate:
			var b heldBody
			if err := json.Unmarshal(rec.Body, &b); err != nil {
				return p, nil, 0, fmt.Errorf("reading step %d's gate at call %d from the transcript: %w", step, rec.Call, err)
			}
			p.CountedTokens = max(p.CountedTokens, b.Tokens)
			p.CountedInputTokens = max(p.CountedInputTokens, b.InputTokens)
			p.CountedCalls = max(p.CountedCalls, b.ToolCalls)
		}
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i].Number < turns[j].Number })
	var done []callBody
	for _, t := range turns {
		ex := agents.Exchange{Turn: t}
		for _, c := range t.Calls {
			o, ok := outcomes[c.Index]
			if !ok {
				break
			}
			ex.Outcomes = append(ex.Outcomes, o.ToolOutcome)
			done = append(done, o)
		}
		p.Exchanges = append(p.Exchanges, ex)
	}
	return p, done, size, nil
}

// runToolUses counts the tool calls the run's steps before step asked for, from their
// tool-turn records: what the repeated-call detector needs after the operator restarted.
func runToolUses(ctx context.Context, store transcript.Store, runUID string, step int32) (*workflow.ToolUses, error) {
	uses := &workflow.ToolUses{}
	q := transcript.Query{RunUID: runUID, Kinds: []transcript.Kind{transcript.KindToolTurn}}
	err := eachRecord(ctx, store, q, func(rec transcript.Record) (bool, error) {
		if rec.Step >= step {
			return false, nil
		}
		var b turnBody
		if json.Unmarshal(rec.Body, &b) == nil {
			for _, c := range b.Calls {
				uses.Add(useOf(rec.Step, c))
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the run's tool calls from the transcript: %w", err)
	}
	return uses, nil
}

func useOf(step int32, c workflow.ToolCall) workflow.ToolUse {
	return workflow.ToolUse{Server: c.Server, Tool: c.Tool, Digest: agents.ArgumentsDigest(c.Arguments), Step: step}
}

// toolDecision is what people decided at the gate of a call, from the run's status: found is
// false while no decision was taken.
func toolDecision(approvals []v1alpha1.ApprovalRecord, gate string, step, call int32) (rec v1alpha1.ApprovalRecord, approvedBy []string, found bool) {
	for _, a := range approvals {
		if a.Gate != gate || a.Step != step || a.ToolCall != call {
			continue
		}
		switch a.Decision {
		case v1alpha1.RecordRejected:
			return a, nil, true
		case v1alpha1.RecordApproved:
			rec, found = a, true
			approvedBy = append(approvedBy, a.By)
		}
	}
	return rec, approvedBy, found
}
