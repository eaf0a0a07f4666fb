package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// A step's text before its config's guardrails: its input before the model sees it
// (ModelInput), its output before the transcript, the status and the next agent see it
// (Output). A tool's result is screened by the toolbox (ToolResult). A guardrail that answers
// gate holds the text for a person's review: the step stops (a Held with its Guard) and, once
// the gate is decided, goes on with the text or blocks it.

// inputCall is where a step's input comes in the step: before its first call.
const inputCall = 0

// screenInput puts the step's input before the ModelInput guardrails: a redaction is what the
// model is given and the step's record keeps, a block fails the step, a gate holds it.
func (c *stepCall) screenInput(ctx context.Context, req *agents.Request) error {
	if len(c.plan.Spec.Guardrails) == 0 || req.Input == "" {
		return nil
	}
	s := c.screen(ctx, v1alpha1.StageModelInput, req.Input, inputCall)
	switch {
	case s.Blocked != nil:
		return errors.New(s.Why())
	case s.Gated != nil:
		return s.Held(v1alpha1.StageModelInput, inputCall)
	}
	req.Input, c.step.Input = s.Text, s.Text
	return nil
}

// screenOutput puts the step's answer before the Output guardrails: a redaction replaces it, a
// block fails the step, a gate holds it (the whole answer in the step's gate record). at is
// where the output comes in the step: one past its last call.
func (c *stepCall) screenOutput(ctx context.Context, res *workflow.StepResult, at int32) {
	if len(c.plan.Spec.Guardrails) == 0 || res.Error != "" || res.Held != nil || res.QuotaHold != nil || res.Output == "" {
		return
	}
	s := c.screen(ctx, v1alpha1.StageOutput, res.Output, at)
	switch {
	case s.Blocked != nil:
		res.Error, res.Output = s.Why(), ""
	case s.Gated != nil:
		res.Output = s.Text
		res.Held = s.Held(v1alpha1.StageOutput, at)
	default:
		res.Output = s.Text
	}
}

// screenUpdate asks the Output guardrails about what a remote agent reports while it works on
// the step, before the transcript keeps it; nil without Output guardrails.
func (c *stepCall) screenUpdate() func(ctx context.Context, text string) guardrails.Screened {
	if len(guardrails.At(c.plan.Spec.Guardrails, v1alpha1.StageOutput)) == 0 {
		return nil
	}
	return func(ctx context.Context, text string) guardrails.Screened {
		return c.r.Guardrails.Screen(ctx, c.plan.Spec.Guardrails, c.guardRequest(v1alpha1.StageOutput, text), nil)
	}
}

// guardRequest is what the step's guardrails are sent about text at stage.
func (c *stepCall) guardRequest(stage v1alpha1.GuardrailStage, text string) guardrails.Request {
	return guardrails.Request{Stage: stage, Namespace: c.rid.Namespace, Run: c.rid.Name, Agent: c.step.Agent,
		Step: c.step.Number, Text: text, Config: c.config}
}

// outputCall is where the step's output comes in it: one past the last call it asked for.
func (c *stepCall) outputCall() int32 {
	c.mu.Lock()
	b := c.box
	c.mu.Unlock()
	if b == nil {
		return 1
	}
	return b.LastCall() + 1
}

// screen asks the stage's guardrails about text, with what people decided at their gates about
// the text at that place of the step, and keeps their verdicts for the record.
func (c *stepCall) screen(ctx context.Context, stage v1alpha1.GuardrailStage, text string, at int32) guardrails.Screened {
	s := c.r.Guardrails.Screen(ctx, c.plan.Spec.Guardrails, c.guardRequest(stage, text),
		guardrails.ReviewOf(c.from.Approvals, c.step.Number, at))
	c.mu.Lock()
	c.guard = append(c.guard, s.Verdicts...)
	c.mu.Unlock()
	return s
}

// verdicts are the guardrails' verdicts on the step so far, those on tool results that waited
// at a gate included.
func (c *stepCall) verdicts() []records.GuardVerdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.box == nil {
		return c.guard
	}
	return append(c.box.Verdicts(), c.guard...)
}

// heldOutput is the answer of a step whose output waited at a guardrail's gate, when it did:
// the step goes on from it, without asking the model again, and its output is screened again
// with the decision taken there. What the answer used was counted when the step was held.
func (c *stepCall) heldOutput(ctx context.Context) (*workflow.StepResult, error) {
	if !c.decidedAtGuard() {
		// Only a step going on from a decision at a guardrail's gate can have an output held.
		return nil, nil
	}
	n := c.step.Number
	recs, err := c.r.Store.List(ctx, transcript.Query{RunUID: c.rid.UID, Step: &n, Kinds: stepToolKinds})
	if err != nil {
		return nil, fmt.Errorf("reading step %d's guardrail gates from the transcript: %w", n, err)
	}
	var held *records.HeldBody
	var bytes int64
	for _, rec := range recs {
		bytes += int64(len(rec.Body))
		if rec.Kind != transcript.KindGuardGate || held != nil {
			continue
		}
		var b records.HeldBody
		if err := json.Unmarshal(rec.Body, &b); err != nil {
			return nil, fmt.Errorf("the transcript's record of step %d held at a guardrail's gate cannot be read: %w", n, err)
		}
		if b.Guard != nil && b.Guard.Stage == v1alpha1.StageOutput && b.Answer != nil {
			held = &b
		}
	}
	if held == nil {
		return nil, nil
	}
	// The step goes on as it was held: with its input as the guardrails left it, and its tool
	// records counted in the run's transcript.
	c.step.Input, c.heldBytes = held.Input, bytes
	res := &workflow.StepResult{Agent: c.step.Agent, Input: held.Input, Result: *held.Answer}
	r := &res.Result
	r.CountedTokens, r.CountedInputTokens, r.CountedToolCalls, r.CountedCost = r.Tokens, r.InputTokens, r.ToolCalls, r.Cost
	c.screenOutput(ctx, res, held.Guard.Call)
	return res, nil
}

// decidedAtGuard says whether people decided at a guardrail's gate in this step: only then
// does the transcript hold an output of it that waited.
func (c *stepCall) decidedAtGuard() bool {
	return slices.ContainsFunc(c.from.Approvals, func(a v1alpha1.ApprovalRecord) bool {
		return a.Step == c.step.Number && strings.HasPrefix(a.Gate, v1alpha1.GuardGatePrefix)
	})
}

// stepToolKinds are the records a step's tools and gates write.
var stepToolKinds = []transcript.Kind{transcript.KindToolTurn, transcript.KindToolStart, transcript.KindTool,
	transcript.KindToolGate, transcript.KindGuardGate}
