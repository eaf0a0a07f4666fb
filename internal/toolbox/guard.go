package toolbox

import (
	"context"
	"slices"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
)

// A call's result before the config's ToolResult guardrails: screened before the model or the
// transcript sees it, and, when a guardrail holds it for review, recorded as it waits and given
// to the model once people decided.

// screen puts a call's result before the config's ToolResult guardrails, before the model or
// the transcript sees it: a redaction replaces it, a block gives the model an error result with
// the guardrail's reason, a gate holds it for a person's review (body.Held) as the guardrails
// before it left it.
func (b *Box) screen(ctx context.Context, body *records.CallBody) guardrails.Screened {
	if len(b.plan.Spec.Guardrails) == 0 {
		return guardrails.Screened{Text: body.Content}
	}
	s := b.guardrails.Screen(ctx, b.plan.Spec.Guardrails, guardrails.Request{Stage: v1alpha1.StageToolResult,
		Namespace: b.run.Namespace, Run: b.run.Name, Agent: b.agent, Step: b.step, Text: body.Content, Config: b.config},
		guardrails.ReviewOf(b.approvals, b.step, body.Index))
	body.Guard = append(body.Guard, s.Verdicts...)
	switch {
	case s.Blocked != nil:
		body.IsError, body.Content, body.Structured = true, s.Why(), nil
	case s.Text != body.Content:
		body.Content, body.Structured = s.Text, nil
	}
	if s.Gated != nil {
		body.Held = v1alpha1.GuardGateName(s.Gated.Guardrail)
	}
	return s
}

// heldResult is the wait of a call's result at the guardrail's gate that holds it.
func heldResult(body records.CallBody, s guardrails.Screened) *workflow.Held {
	h := s.Held(v1alpha1.StageToolResult, body.Index)
	h.Call, h.Taint = body.ToolCall, body.Taint
	return h
}

// reviewed is the outcome of a call whose result waited at a guardrail's gate, once people
// decided there: its result screened again, the guardrail they decided at answering as they
// decided. A result nobody decided about yet holds the step again.
func (b *Box) reviewed(ctx context.Context, body records.CallBody) (workflow.ToolOutcome, error) {
	body.Guard = nil
	s := b.screen(ctx, &body)
	b.mu.Lock()
	b.verdicts = append(b.verdicts, s.Verdicts...)
	b.mu.Unlock()
	if s.Gated != nil {
		return workflow.ToolOutcome{}, heldResult(body, s)
	}
	return body.ToolOutcome, nil
}

// Verdicts are the guardrails' verdicts on results that waited at their gates, screened again
// as the step went on: the step's record keeps them. The slice is the caller's.
func (b *Box) Verdicts() []records.GuardVerdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.verdicts)
}

// reviewAll gives the model the results that waited at guardrails' gates as people decided there.
// done are the step's calls with outcomes, in the order of its exchanges' outcomes.
func (b *Box) reviewAll(ctx context.Context, done []records.CallBody) error {
	k := 0
	for i := range b.progress.Exchanges {
		outs := b.progress.Exchanges[i].Outcomes
		for j := range outs {
			c := done[k]
			k++
			if c.Held == "" {
				continue
			}
			out, err := b.reviewed(ctx, c)
			if err != nil {
				return err
			}
			outs[j] = out
		}
	}
	return nil
}
