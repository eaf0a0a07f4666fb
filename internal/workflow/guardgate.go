package workflow

import (
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A guardrail that answers `gate` holds its text for a person's review at the gate
// guard/<guardrail>: a tool's result, a step's input or a step's output. The step stops there
// (a Held with its Guard) and goes on once the gate is decided: approved, with the text;
// rejected, with the text blocked as the guardrail's block would. Like a tool's gate, it holds
// whatever the run's approvals policy, with one approval and no timeout.

// maxGuardReason bounds what a guardrail's reason takes in status.
const maxGuardReason = 1024

// guardGate is the gate of that name if it is a guardrail's of the config.
func (p *Plan) guardGate(name string) (v1alpha1.ApprovalGate, bool) {
	guardrail, ok := strings.CutPrefix(name, v1alpha1.GuardGatePrefix)
	if !ok {
		return v1alpha1.ApprovalGate{}, false
	}
	for _, g := range p.Spec.Guardrails {
		if g.Name == guardrail {
			return v1alpha1.ApprovalGate{Name: name, Required: 1, OnTimeout: "Reject"}, true
		}
	}
	return v1alpha1.ApprovalGate{}, false
}

// GateDecision is what people decided at a gate that holds one call, or one guardrail's text,
// of a step (status.approvals keeps the step and the call with each decision): the rejection,
// or the approval and everyone who approved. decided is false while nobody has.
func GateDecision(approvals []v1alpha1.ApprovalRecord, gate string, step, call int32) (rec v1alpha1.ApprovalRecord, approvedBy []string, decided bool) {
	for _, a := range approvals {
		if a.Gate != gate || a.Step != step || a.ToolCall != call {
			continue
		}
		switch a.Decision {
		case v1alpha1.RecordRejected:
			return a, nil, true
		case v1alpha1.RecordApproved, v1alpha1.RecordTimedOut:
			rec, decided = a, true
			approvedBy = append(approvedBy, a.By)
		}
	}
	return rec, approvedBy, decided
}

// guardedText names the text a guardrail's gate holds.
func guardedText(g v1alpha1.PendingGuard, call ToolCall) string {
	switch g.Stage {
	case v1alpha1.StageToolResult:
		return fmt.Sprintf("the result of call %d of %s/%s", call.Index, call.Server, call.Tool)
	case v1alpha1.StageModelInput:
		return "the step's input"
	}
	return "the step's output"
}

// holdGuard makes the run wait at a guardrail's gate with the text it holds, and the call
// whose result it is, if it is one's; the step goes on from its transcript once the gate is
// decided.
func holdGuard(p *Plan, d *Update, res StepResult, now time.Time) {
	s := &d.Status
	held := res.Held
	guard := *held.Guard
	guard.Step = s.StepCount + 1
	guard.Reason = statusText(guard.Reason, maxGuardReason)
	guard.Text = statusText(guard.Text, maxValue)
	g, ok := p.gate(res.Agent, held.Gate)
	if !ok {
		g = v1alpha1.ApprovalGate{Name: held.Gate, Required: 1, OnTimeout: "Reject"}
	}
	s.Phase = v1alpha1.PhaseAwaitingApproval
	s.PendingApproval = waitAt(g, now)
	s.PendingApproval.Guard = &guard
	if held.Call.Server != "" {
		call := pendingCallOf(held, guard.Step)
		s.PendingApproval.ToolCall = &call
	}
	why := ""
	if guard.Reason != "" {
		why = " (" + guard.Reason + ")"
	}
	msg := fmt.Sprintf("guardrail %s asks a person to review %s at step %d%s, in status.pendingApproval.guard.text; waiting at gate %s. Approve: kubectl annotate agentrun %s -n %s %s=%s ; reject, and the text is blocked: kubectl annotate agentrun %s -n %s %s=%s",
		guard.Guardrail, guardedText(guard, held.Call), guard.Step, why, g.Name, p.runName, p.runNamespace, v1alpha1.AnnotationApprove, g.Name,
		p.runName, p.runNamespace, v1alpha1.AnnotationReject, g.Name)
	progress(s, now, v1alpha1.PhaseAwaitingApproval, msg)
	d.event(EventNormal, EventAwaitingApproval, "%s", msg)
}

// heldInStep says whether the pending gate holds something inside a step (a call, or a
// guardrail's text), which the step decides about once it goes on.
func heldInStep(pa v1alpha1.PendingApproval) bool {
	return pa.ToolCall != nil || pa.Guard != nil
}

// heldAt is the step and the call a decision at the pending gate is recorded with: those of the
// call or the text it holds, none for a gate between steps.
func heldAt(pa v1alpha1.PendingApproval) (step, call int32) {
	switch {
	case pa.Guard != nil:
		return pa.Guard.Step, pa.Guard.Call
	case pa.ToolCall != nil:
		return pa.ToolCall.Step, pa.ToolCall.Call
	}
	return 0, 0
}

// pendingCall is the call the pending gate holds, or whose result it holds, if any.
func pendingCall(pa v1alpha1.PendingApproval) ToolCall {
	if c := pa.ToolCall; c != nil {
		return ToolCall{Index: c.Call, Server: c.Server, Tool: c.Tool}
	}
	return ToolCall{}
}
