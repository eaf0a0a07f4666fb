package workflow

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Where a run waits for people. A run comes to a gate after an agent's step, when it would
// complete, past another gate and at a tool call that needs approval; gateAt alone decides which
// gate, if any, holds it there. The run then waits in AwaitingApproval, with no deadline
// running, until the gate is decided (approvals.go). An AwaitInput signal pauses the run in
// AwaitingInput until a person replies.

// ForRun is the plan for one run: the name and namespace go into the commands that Events give
// people, the policy says whether the run stops at gates, and the creator (empty when it was not
// recorded) is who may not approve at gates with allowSelfApproval: false. The plan is a copy
// that shares everything else with p, which is read-only once built, so runs of one config
// share its checked spec and compiled schemas.
func (p *Plan) ForRun(name, namespace string, policy v1alpha1.ApprovalPolicy, creator string) *Plan {
	run := *p
	run.runName, run.runNamespace = name, namespace
	run.skipGates = policy == v1alpha1.ApprovalsSkip
	run.creator = creator
	return &run
}

// MaxEarlierSteps bounds the steps of earlier turns a turn's loop detectors see.
const MaxEarlierSteps = 64

// WithEarlierTurns is the plan for a turn of a session whose earlier turns, given the same
// history, took these steps (oldest first) and were these runs (their UIDs): its repeated
// input, output and tool call detectors count them with its own. The last MaxEarlierSteps steps
// are kept.
func (p *Plan) WithEarlierTurns(steps []v1alpha1.HandoffRecord, runs []string) *Plan {
	if len(steps) == 0 && len(runs) == 0 {
		return p
	}
	turn := *p
	kept := make([]v1alpha1.HandoffRecord, 0, min(len(steps), MaxEarlierSteps))
	for _, r := range steps[max(len(steps)-MaxEarlierSteps, 0):] {
		if !isRetry(r) {
			kept = append(kept, r)
		}
	}
	turn.earlier, turn.earlierRuns = kept, slices.Clone(runs)
	return &turn
}

// EarlierTurns are the runs of a session's earlier turns given the same history as this one:
// the repeated tool call detector counts their calls.
func (p *Plan) EarlierTurns() []string { return p.earlierRuns }

// stopKind is what brings a run to a stop.
type stopKind int

const (
	// stopAfterStep: an agent's step ended.
	stopAfterStep stopKind = iota
	// stopPastGate: the run passed the gate it waited at.
	stopPastGate
	// stopToolCall: the agent's step asks for a tool call that needs approval.
	stopToolCall
	// stopContinued: the run starts where an earlier run waited at a gate (spec.from).
	stopContinued
)

// stop is a point where a gate may hold a run.
type stop struct {
	kind stopKind
	// agent took the step that ended, asks for the call, or has control.
	agent string
	// outcome is how the agent's step ended (stopAfterStep).
	outcome v1alpha1.StepOutcome
	// ends is how the run ends once no gate holds it, when it would end here.
	ends *v1alpha1.Completion
	// gate is the gate the run passed (stopPastGate), or the one the earlier run waited at
	// (stopContinued).
	gate string
	// call is the tool call the step asks for (stopToolCall).
	call *ToolCall
}

// gateAt decides which gate, if any, holds the run at a stop. It is the one place that says
// where runs wait:
//   - after an agent's step, at the gate after that agent; not after a failed step, an answer
//     cut at the output-token limit or one sent back to its agent for repair, which people
//     judge once the agent has finished it;
//   - when the step would complete the run, at the gate after its agent, else at the gate
//     before Complete; a run that ends any other way waits for no one;
//   - past a gate that held a completion, at the gate before Complete, unless that is the one
//     it just passed;
//   - at a tool call that needs approval, at the tool's gate;
//   - where an earlier run waited, when this one starts from it, at that gate again.
//
// A config's gate the run's approvals policy skips holds no one (skips); a tool's gate holds
// whatever the policy.
func (p *Plan) gateAt(at stop) (v1alpha1.ApprovalGate, bool) {
	none := v1alpha1.ApprovalGate{}
	switch at.kind {
	case stopToolCall:
		if g, ok := p.ToolGate(at.agent, at.call.Server, at.call.Tool); ok {
			return g, true
		}
		// The call was held at its tool's gate: it waits there for one approval.
		return v1alpha1.ApprovalGate{Name: v1alpha1.ToolGateName(at.call.Server, at.call.Tool), Required: 1}, true
	case stopContinued:
		return p.gate(at.agent, at.gate)
	case stopPastGate:
		if g, ok := p.gateBeforeComplete(); ok && at.ends != nil && g.Name != at.gate {
			return g, true
		}
		return none, false
	}
	switch {
	case at.ends != nil && at.ends.Reason.Phase() != v1alpha1.PhaseSucceeded:
		return none, false
	case at.ends != nil:
		if g, ok := p.gateAfter(at.agent); ok {
			return g, true
		}
		return p.gateBeforeComplete()
	case at.outcome == v1alpha1.OutcomeFailed || at.outcome == v1alpha1.OutcomeTruncated || at.outcome == v1alpha1.OutcomeInvalid:
		return none, false
	}
	return p.gateAfter(at.agent)
}

// gateAfter is the gate that opens after the agent's step, if any.
func (p *Plan) gateAfter(agent string) (v1alpha1.ApprovalGate, bool) {
	for _, g := range p.Spec.Approvals {
		if g.After == agent && !p.skips(g) {
			return g, true
		}
	}
	return v1alpha1.ApprovalGate{}, false
}

// gateBeforeComplete is the gate that opens when the run would complete, if any.
func (p *Plan) gateBeforeComplete() (v1alpha1.ApprovalGate, bool) {
	for _, g := range p.Spec.Approvals {
		if g.Before == "Complete" && !p.skips(g) {
			return g, true
		}
	}
	return v1alpha1.ApprovalGate{}, false
}

// skips says whether the run passes gate g without stopping: a run with approvals: Skip passes
// every gate but those that need an approver other than the run's creator, since the creator
// chose Skip.
func (p *Plan) skips(g v1alpha1.ApprovalGate) bool {
	return p.skipGates && selfApprovalAllowed(g)
}

// gate is the gate of that name a run may wait at: one of the config's gates, the gate of a
// tool the agent with control calls, or a guardrail's.
func (p *Plan) gate(agent, name string) (v1alpha1.ApprovalGate, bool) {
	if g, ok := p.toolGateNamed(agent, name); ok {
		return g, true
	}
	if g, ok := p.guardGate(name); ok {
		return g, true
	}
	return p.configGate(name)
}

// pendingGate is the gate the run waits at.
func (p *Plan) pendingGate(s *v1alpha1.AgentRunStatus) (v1alpha1.ApprovalGate, bool) {
	return p.gate(s.CurrentAgent, s.PendingApproval.Gate)
}

// configGate is the config's gate of that name, if there is one.
func (p *Plan) configGate(name string) (v1alpha1.ApprovalGate, bool) {
	for _, g := range p.Spec.Approvals {
		if g.Name == name {
			return g, true
		}
	}
	return v1alpha1.ApprovalGate{}, false
}

// selfApprovalAllowed reports whether the run's creator may approve at gate g, as by default.
func selfApprovalAllowed(g v1alpha1.ApprovalGate) bool {
	return g.AllowSelfApproval == nil || *g.AllowSelfApproval
}

func required(g v1alpha1.ApprovalGate) int { return max(int(g.Required), 1) }

// openGate makes the run wait at gate g. completes is how the run ends once the gate passes,
// when the step before it finished the run.
func openGate(p *Plan, d *Update, g v1alpha1.ApprovalGate, completes *v1alpha1.Completion, now time.Time) {
	s := &d.Status
	s.Phase = v1alpha1.PhaseAwaitingApproval
	s.PendingApproval = waitAt(g, now)
	s.PendingApproval.Completes = completes
	msg := gateMessage(p, g)
	progress(s, now, v1alpha1.PhaseAwaitingApproval, msg)
	d.event(EventNormal, EventAwaitingApproval, "%s", msg)
}

// waitAt is a run's wait at gate g from now, with when its timeout decides it.
func waitAt(g v1alpha1.ApprovalGate, now time.Time) *v1alpha1.PendingApproval {
	w := &v1alpha1.PendingApproval{Gate: g.Name, Since: metav1.NewMicroTime(now)}
	if t := g.Timeout.OrZero(); t > 0 {
		expires := metav1.NewMicroTime(now.Add(t))
		w.Expires = &expires
	}
	return w
}

// gateMessage says what a gate waits for and the commands that decide it.
func gateMessage(p *Plan, g v1alpha1.ApprovalGate) string {
	return fmt.Sprintf("waiting at gate %s for %d approval(s)%s. Approve: kubectl annotate agentrun %s -n %s %s=%s ; reject: kubectl annotate agentrun %s -n %s %s=%s (add %s=<agent> or %s=replan to send it back, %s=<text> to explain)",
		g.Name, required(g), p.approvers(g), p.runName, p.runNamespace, v1alpha1.AnnotationApprove, g.Name,
		p.runName, p.runNamespace, v1alpha1.AnnotationReject, g.Name,
		v1alpha1.AnnotationRevise, v1alpha1.AnnotationRevise, v1alpha1.AnnotationFeedback)
}

// approvers says who may approve at a gate with allowSelfApproval: false, for gateMessage.
func (p *Plan) approvers(g v1alpha1.ApprovalGate) string {
	switch {
	case selfApprovalAllowed(g):
		return ""
	case p.creator == "":
		return " (the run's creator was not recorded, so no approval can pass this gate: reject it or let it time out)"
	}
	return fmt.Sprintf(" from people other than %s, who created the run", p.creator)
}

// holdToolCall makes the run wait at a tool's gate with the call the step asked for; the step
// goes on from its transcript once the gate is decided.
func holdToolCall(p *Plan, d *Update, g v1alpha1.ApprovalGate, call v1alpha1.PendingToolCall, now time.Time) {
	s := &d.Status
	s.Phase = v1alpha1.PhaseAwaitingApproval
	s.PendingApproval = waitAt(g, now)
	s.PendingApproval.ToolCall = &call
	msg := fmt.Sprintf("agent %s asks to call %s/%s at step %d (arguments in status.pendingApproval.toolCall); waiting at gate %s for %d approval(s). Approve: kubectl annotate agentrun %s -n %s %s=%s ; reject: kubectl annotate agentrun %s -n %s %s=%s (the agent is told, with %s=<text> if given)",
		s.CurrentAgent, call.Server, call.Tool, call.Step, g.Name, required(g), p.runName, p.runNamespace, v1alpha1.AnnotationApprove, g.Name,
		p.runName, p.runNamespace, v1alpha1.AnnotationReject, g.Name, v1alpha1.AnnotationFeedback)
	progress(s, now, v1alpha1.PhaseAwaitingApproval, msg)
	d.event(EventNormal, EventAwaitingApproval, "%s", msg)
}

// awaitInput pauses the run until a person replies to the agent's question.
func awaitInput(p *Plan, d *Update, agent, question string, now time.Time) {
	s := &d.Status
	s.Phase = v1alpha1.PhaseAwaitingInput
	s.CurrentAgent = agent
	s.PendingInput = &v1alpha1.PendingInput{Agent: agent, Question: statusText(question, maxValue), Since: metav1.NewMicroTime(now)}
	msg := fmt.Sprintf("agent %s asks for input (see status.pendingInput.question). Reply: kubectl annotate agentrun %s -n %s %s=<answer>",
		agent, p.runName, p.runNamespace, v1alpha1.AnnotationReply)
	progress(s, now, v1alpha1.PhaseAwaitingInput, msg)
	d.event(EventNormal, EventAwaitingInput, "%s", msg)
}

// resume puts a waiting run back to work, counting the wait as time not spent on the run.
func resume(p *Plan, d *Update, since metav1.MicroTime, now time.Time) {
	s := &d.Status
	s.Waited = addWait(s.Waited, now.Sub(since.Time))
	s.PendingApproval, s.PendingInput = nil, nil
	s.Phase = v1alpha1.PhaseRunning
	progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	if t, ok := check(p, s, now); ok {
		endOrWrapUp(p, d, t, now)
	}
}

// passGate lets the run through its pending gate: to the next gate that holds it, to its end,
// or back to work.
func passGate(p *Plan, d *Update, feedback string, now time.Time) {
	s := &d.Status
	pending := *s.PendingApproval
	if g, ok := p.gateAt(stop{kind: stopPastGate, gate: pending.Gate, ends: pending.Completes}); ok {
		openGate(p, d, g, pending.Completes, now)
		s.Waited = addWait(s.Waited, now.Sub(pending.Since.Time))
		return
	}
	if c := pending.Completes; c != nil {
		s.Waited = addWait(s.Waited, now.Sub(pending.Since.Time))
		s.PendingApproval = nil
		if c.State != "" {
			s.State = c.State
		}
		end(d, Trip{Reason: c.Reason, Message: c.Message}, now)
		return
	}
	// A gate inside a step goes back into the step it held: the step's input stays as it was.
	if feedback != "" && !heldInStep(pending) {
		s.Input = statusText(s.Input+"\n\nFeedback at gate "+pending.Gate+": "+feedback, maxInput)
	}
	resume(p, d, pending.Since, now)
}

// addWait adds to the time a run waited for people, up to the longest duration the API holds.
func addWait(w *v1alpha1.Duration, more time.Duration) *v1alpha1.Duration {
	// Whole seconds: kubectl describe prints the value as it is, and 1m3s reads better than
	// 1m2.745113042s.
	return v1alpha1.NewDuration(min((w.OrZero() + more).Round(time.Second), v1alpha1.MaxDuration))
}
