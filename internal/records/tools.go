package records

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// The records of tool calls. A step's tool loop writes, in order: a tool-turn record for each
// answer of the model that asks for calls, before any call is made; a tool-start record before
// each call of a tool with side effects; a tool record with each call's outcome. A step held at
// a tool's gate ends, for now, with a tool-gate record. Records are keyed by step and by turn or
// call number, so a step that runs again (after a gate, or in an operator that restarted) finds
// what it already did.

// TurnBody is a tool-turn record: an answer of the model that asked for calls.
type TurnBody struct {
	Agent       string `json:"agent"`
	Text        string `json:"text,omitempty"`
	Tokens      int64  `json:"tokens,omitempty"`
	InputTokens int64  `json:"inputTokens,omitempty"`
	// Cost is what the turn's model call cost, in its step's currency, when it was priced.
	Cost  string              `json:"cost,omitempty"`
	Calls []workflow.ToolCall `json:"calls"`
}

// StartBody is a tool-start record: a call of a tool with side effects, about to be sent.
type StartBody struct {
	Server         string `json:"server"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// CallBody is a tool record: one call's outcome.
type CallBody struct {
	Agent string `json:"agent"`
	workflow.ToolCall
	workflow.ToolOutcome
	// Structured is the tool's structured result, when it gave one.
	Structured json.RawMessage `json:"structured,omitempty"`
	// Refused says why a call was not made: rejected at its gate, not allowed, past a limit;
	// Refusal is which (records written before it was kept say it only in words).
	Refused        string           `json:"refused,omitempty"`
	Refusal        workflow.Refusal `json:"refusal,omitempty"`
	ApprovedBy     []string         `json:"approvedBy,omitempty"`
	IdempotencyKey string           `json:"idempotencyKey,omitempty"`
	// Taint is where untrusted content in the call's context came from, when there was some.
	Taint string `json:"taint,omitempty"`
	// Guard are the guardrails' verdicts on the call's result, before the model saw it.
	Guard []GuardVerdict `json:"guard,omitempty"`
	// Held is the guardrail's gate the result waits at for a person's review: the model has
	// not seen it, and sees it only as the decision there lets it.
	Held      string    `json:"held,omitempty"`
	Started   time.Time `json:"started"`
	LatencyMs int64     `json:"latencyMs"`
}

// HeldBody is a tool-gate record: the step held at a call, and what it used until then.
type HeldBody struct {
	Agent              string            `json:"agent"`
	Input              string            `json:"input"`
	Gate               string            `json:"gate"`
	Call               workflow.ToolCall `json:"call"`
	Tokens             int64             `json:"tokens"`
	CountedTokens      int64             `json:"countedTokens"`
	InputTokens        int64             `json:"inputTokens,omitempty"`
	CountedInputTokens int64             `json:"countedInputTokens,omitempty"`
	ToolCalls          int32             `json:"toolCalls"`
	CountedToolCalls   int32             `json:"countedToolCalls"`
	// Cost is what the step's model calls cost until it was held, CountedCost the part of it
	// counted at earlier gates, in Currency.
	Cost        string `json:"cost,omitempty"`
	CountedCost string `json:"countedCost,omitempty"`
	Currency    string `json:"currency,omitempty"`
	// Taint is the step's, when its context held untrusted content: a call held at its taint
	// gate says where it came from.
	Taint *v1alpha1.Taint `json:"taint,omitempty"`
	// Guard is the text a guardrail's gate holds (a guard-gate record), and Answer the step's
	// answer whole when it is its output that waits: the step goes on from it once the gate is
	// decided, without asking the model again.
	Guard  *v1alpha1.PendingGuard `json:"guard,omitempty"`
	Answer *workflow.Result       `json:"answer,omitempty"`
}

// NewHeld is the gate record body of a step held at res's call, or at a guardrail's gate.
func NewHeld(res workflow.StepResult) HeldBody {
	return HeldBody{Agent: res.Agent, Input: res.Input, Gate: res.Held.Gate, Call: res.Held.Call,
		Tokens: res.Tokens, CountedTokens: res.CountedTokens, InputTokens: res.InputTokens, CountedInputTokens: res.CountedInputTokens,
		ToolCalls: res.ToolCalls, CountedToolCalls: res.CountedToolCalls,
		Cost: res.Cost, CountedCost: res.CountedCost, Currency: res.Currency, Taint: res.Taint, Guard: heldGuard(res.Held.Guard)}
}

// maxHeldText bounds the copy of a held text a guard-gate record keeps: the text is whole in the
// call's record, the step's input or the answer the record keeps.
const maxHeldText = 4 << 10

func heldGuard(g *v1alpha1.PendingGuard) *v1alpha1.PendingGuard {
	if g == nil {
		return nil
	}
	out := *g
	out.Text = textbound.Bytes(out.Text, maxHeldText)
	return &out
}

// Record is the step's gate record: a tool-gate record, or a guard-gate record keyed by where
// in the step the held text came (Call) and by which of the config's guardrails holds it
// (Attempt: guardrail, its place among them from 1), since several may hold one text in turn.
func (b HeldBody) Record(run RunID, step, guardrail int32, ended time.Time) transcript.Record {
	key := transcript.Key{Kind: transcript.KindToolGate, Step: step, Call: b.Call.Index}
	if b.Guard != nil {
		key = transcript.Key{Kind: transcript.KindGuardGate, Step: step, Attempt: guardrail, Call: b.Guard.Call}
	}
	return run.Record(key, ended, transcript.Body(b))
}

// StepResult is the held step as the workflow core applies it.
func (b HeldBody) StepResult() workflow.StepResult {
	return workflow.StepResult{Agent: b.Agent, Input: b.Input, Result: workflow.Result{
		Tokens: b.Tokens, CountedTokens: b.CountedTokens, InputTokens: b.InputTokens, CountedInputTokens: b.CountedInputTokens,
		ToolCalls: b.ToolCalls, CountedToolCalls: b.CountedToolCalls,
		Cost: b.Cost, CountedCost: b.CountedCost, Currency: b.Currency, Taint: b.Taint,
		Held: &workflow.Held{Gate: b.Gate, Call: b.Call, Taint: heldTaint(b), Guard: b.Guard},
	}}
}

// heldTaint is where the untrusted content in a held call's context came from, for a call held
// at its taint gate.
func heldTaint(b HeldBody) string {
	if b.Taint == nil || !strings.HasPrefix(b.Gate, v1alpha1.TaintGatePrefix) {
		return ""
	}
	return b.Taint.Source
}

// Tool is what readers show of a tool record, whichever its kind: the call it is about (a
// call's outcome, its start, a step held at its gate) or a turn's calls, and what the record
// says of it. It is read from the record's own body.
type Tool struct {
	Agent string
	workflow.ToolCall
	workflow.ToolOutcome
	// Calls and Text are a turn's; Tokens a turn's or a held step's.
	Calls  []workflow.ToolCall
	Text   string
	Tokens int64
	// Refused, ApprovedBy, IdempotencyKey and LatencyMs are a call's; Gate a held step's.
	Refused        string
	ApprovedBy     []string
	IdempotencyKey string
	LatencyMs      int64
	Gate           string
	// Guard is what a guardrail's gate holds, for a step held there; Held is the gate a call's
	// result waited at.
	Guard *v1alpha1.PendingGuard
	Held  string
}

// toolOf reads a tool record's body by its kind.
func toolOf(kind transcript.Kind, body json.RawMessage) Tool {
	switch kind {
	case transcript.KindToolTurn:
		b := bodyAs[TurnBody](body)
		return Tool{Agent: b.Agent, Calls: b.Calls, Text: b.Text, Tokens: b.Tokens}
	case transcript.KindToolStart:
		b := bodyAs[StartBody](body)
		return Tool{ToolCall: workflow.ToolCall{Server: b.Server, Tool: b.Tool}, IdempotencyKey: b.IdempotencyKey}
	case transcript.KindTool:
		b := bodyAs[CallBody](body)
		return Tool{Agent: b.Agent, ToolCall: b.ToolCall, ToolOutcome: b.ToolOutcome, Refused: b.Refused,
			ApprovedBy: b.ApprovedBy, IdempotencyKey: b.IdempotencyKey, LatencyMs: b.LatencyMs, Held: b.Held}
	case transcript.KindToolGate, transcript.KindGuardGate:
		b := bodyAs[HeldBody](body)
		return Tool{Agent: b.Agent, ToolCall: b.Call, Gate: b.Gate, Tokens: b.Tokens, Guard: b.Guard}
	}
	return Tool{}
}

// Note says how a call went, when it did not simply succeed.
func (t Tool) Note() string {
	switch {
	case t.Refused != "":
		return "not made: " + t.Refused
	case t.IsError:
		return "error"
	case len(t.ApprovedBy) > 0:
		return "approved by " + strings.Join(t.ApprovedBy, ", ")
	}
	return ""
}

// CallString is a call in one line: its number, server, tool and arguments.
func CallString(c workflow.ToolCall) string {
	return fmt.Sprintf("#%d %s/%s %s", c.Index, c.Server, c.Tool, strings.TrimSpace(string(c.Arguments)))
}

// GuardVerdict is one guardrail's word on one text: a tool's result, a step's input or output.
type GuardVerdict struct {
	Guardrail string                  `json:"guardrail"`
	Stage     v1alpha1.GuardrailStage `json:"stage"`
	// Action is what the answer came to: allow, block, redact, or gate (the text held for a
	// person's review at guard/<guardrail>); a gate decided comes to allow or block, with who
	// decided in DecidedBy.
	Action string `json:"action"`
	// Answered is what the guardrail answered, when it differs from Action.
	Answered string `json:"answered,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Failed says the guardrail could not answer, and why; Action is then what its failure
	// policy makes of that.
	Failed    string `json:"failed,omitempty"`
	LatencyMs int64  `json:"latencyMs"`
	// DecidedBy is who approved or rejected the text at the guardrail's gate.
	DecidedBy string `json:"decidedBy,omitempty"`
}
