package steps

import (
	"context"
	"errors"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
)

// A step's text before its config's guardrails: its input before the model sees it
// (ModelInput), its output before the transcript, the status and the next agent see it
// (Output). A tool's result is screened by the toolbox (ToolResult).

// screenInput puts the step's input before the ModelInput guardrails: a redaction is what the
// model is given and the step's record keeps, a block fails the step.
func (c *stepCall) screenInput(ctx context.Context, req *agents.Request) error {
	if len(c.plan.Spec.Guardrails) == 0 || req.Input == "" {
		return nil
	}
	s := c.screen(ctx, v1alpha1.StageModelInput, req.Input)
	if s.Blocked != nil {
		return errors.New(s.Why())
	}
	req.Input, c.step.Input = s.Text, s.Text
	return nil
}

// screenOutput puts the step's answer before the Output guardrails: a redaction replaces it, a
// block fails the step.
func (c *stepCall) screenOutput(ctx context.Context, res *workflow.StepResult) {
	if len(c.plan.Spec.Guardrails) == 0 || res.Error != "" || res.Held != nil || res.QuotaHold != nil || res.Output == "" {
		return
	}
	s := c.screen(ctx, v1alpha1.StageOutput, res.Output)
	switch {
	case s.Blocked != nil:
		res.Error, res.Output = s.Why(), ""
	default:
		res.Output = s.Text
	}
}

// screen asks the stage's guardrails about text, and keeps their verdicts for the record.
func (c *stepCall) screen(ctx context.Context, stage v1alpha1.GuardrailStage, text string) guardrails.Screened {
	s := c.r.Guardrails.Screen(ctx, c.plan.Spec.Guardrails, guardrails.Request{Stage: stage, Namespace: c.rid.Namespace,
		Run: c.rid.Name, Agent: c.step.Agent, Step: c.step.Number, Text: text, Config: c.config})
	c.mu.Lock()
	c.guard = append(c.guard, s.Verdicts...)
	c.mu.Unlock()
	return s
}

// verdicts are the guardrails' verdicts on the step so far.
func (c *stepCall) verdicts() []records.GuardVerdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.guard
}
