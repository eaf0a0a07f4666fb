// Package guardrails asks a config's screening services about the text of a step: its tool
// results, its input, its output. What each answer comes to is decided here without I/O
// (Decide, Screen); Client makes the calls, through the egress policy.
package guardrails

import (
	"fmt"
	"slices"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// Actions a guardrail answers.
const (
	Allow  = "allow"
	Block  = "block"
	Redact = "redact"
	Gate   = "gate"
)

// Bounds of what a guardrail's answer may put in the transcript.
const (
	maxReasonBytes = 1 << 10
	// MaxTextBytes bounds a text sent to a guardrail, and what a redaction may give back.
	MaxTextBytes = 256 << 10
)

// Request is what a guardrail is sent.
type Request struct {
	Stage     v1alpha1.GuardrailStage `json:"stage"`
	Namespace string                  `json:"namespace"`
	Run       string                  `json:"run"`
	Agent     string                  `json:"agent"`
	Step      int32                   `json:"step"`
	Text      string                  `json:"text"`
	// Config names the run's config, in metrics; it is not sent.
	Config string `json:"-"`
}

// Answer is what a guardrail answers.
type Answer struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	Text   string `json:"text,omitempty"`
}

// Verdict is one guardrail's word on one text, as the transcript keeps it.
type Verdict = records.GuardVerdict

// Decide is what a guardrail's answer comes to, or, when it could not answer (failed), what its
// failure policy makes of that. text is the text after it: a redaction's.
func Decide(g v1alpha1.Guardrail, stage v1alpha1.GuardrailStage, a Answer, failed error) (Verdict, string) {
	v := Verdict{Guardrail: g.Name, Stage: stage, Reason: textbound.Bytes(a.Reason, maxReasonBytes)}
	if failed != nil {
		v.Failed = textbound.Bytes(failed.Error(), maxReasonBytes)
		v.Action = Block
		if g.Failure == v1alpha1.FailOpen {
			v.Action = Allow
		}
		return v, ""
	}
	switch a.Action {
	case Allow, Block:
		v.Action = a.Action
	case Redact:
		v.Action = Redact
		return v, textbound.Bytes(a.Text, MaxTextBytes)
	case Gate:
		v.Action = Gate
	default:
		v.Action, v.Answered = Block, textbound.Bytes(a.Action, 64)
		v.Reason = textbound.Bytes(fmt.Sprintf("the guardrail answered %q, which is none of allow, block, redact and gate", a.Action), maxReasonBytes)
	}
	return v, ""
}

// Screened is what a text came to after a stage's guardrails.
type Screened struct {
	// Text is the text to go on with: redacted where a guardrail redacted it.
	Text string
	// Blocked is the verdict that held the text back, if one did.
	Blocked *Verdict
	// Gated is the verdict that holds the text for a person's review at the guardrail's gate,
	// if one does: Text is then the text as the guardrails before it left it.
	Gated *Verdict
	// Verdicts are every guardrail's, in order.
	Verdicts []Verdict
}

// Why is what the model or the step is told of a blocked text.
func (s Screened) Why() string {
	if s.Blocked == nil {
		return ""
	}
	b := s.Blocked
	switch {
	case b.DecidedBy != "":
		return fmt.Sprintf("blocked: rejected at gate %s by %s%s", v1alpha1.GuardGateName(b.Guardrail), b.DecidedBy, prefixed(": ", b.Reason))
	case b.Failed != "":
		return fmt.Sprintf("blocked: guardrail %s could not answer (%s)", b.Guardrail, b.Failed)
	case b.Reason != "":
		return fmt.Sprintf("blocked by guardrail %s: %s", b.Guardrail, b.Reason)
	}
	return "blocked by guardrail " + b.Guardrail
}

// At are the config's guardrails asked at stage, in their order.
func At(all []v1alpha1.Guardrail, stage v1alpha1.GuardrailStage) []v1alpha1.Guardrail {
	var out []v1alpha1.Guardrail
	for _, g := range all {
		if slices.Contains(g.Stages, stage) {
			out = append(out, g)
		}
	}
	return out
}

// Review is what people decided at a guardrail's gate about the text being screened, if they
// did: the gate's rejection or approval (workflow.GateDecision).
type Review func(guardrail string) (rec v1alpha1.ApprovalRecord, decided bool)

// ReviewOf is what the run's approvals record of the guardrails' gates for the text at call (its
// place in the step: status.pendingApproval.guard.call) of step.
func ReviewOf(approvals []v1alpha1.ApprovalRecord, step, call int32) Review {
	return func(guardrail string) (v1alpha1.ApprovalRecord, bool) {
		rec, _, decided := workflow.GateDecision(approvals, v1alpha1.GuardGateName(guardrail), step, call)
		return rec, decided
	}
}

// Held is the wait of the text at stage, at call of its step, at the gate of the guardrail that
// holds it (Gated, which must be set).
func (s Screened) Held(stage v1alpha1.GuardrailStage, call int32) *workflow.Held {
	g := s.Gated
	return &workflow.Held{Gate: v1alpha1.GuardGateName(g.Guardrail),
		Guard: &v1alpha1.PendingGuard{Guardrail: g.Guardrail, Stage: stage, Call: call, Reason: g.Reason, Text: s.Text}}
}

// Reviewed is what the guardrail's gate answer comes to once people decided at its gate: allow
// when they approved, block with their feedback when they rejected. decided is false while
// nobody has.
func Reviewed(v Verdict, review Review) (Verdict, bool) {
	if review == nil {
		return v, false
	}
	rec, decided := review(v.Guardrail)
	if !decided {
		return v, false
	}
	v.Answered, v.DecidedBy = Gate, rec.By
	v.Action = Allow
	if rec.Decision == v1alpha1.RecordRejected {
		v.Action, v.Reason = Block, textbound.Bytes(rec.Feedback, maxReasonBytes)
	}
	return v, true
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
