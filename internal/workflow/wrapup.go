package workflow

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A run with limits.wrapUp ends with an answer rather than an error when a step, handoff, token,
// cost or time limit runs out: the wrap-up agent has one last turn, with no handoffs and no
// tools, told which limit ran out. Whatever it answers ends the run Succeeded, reason WrappedUp,
// with the limit as evidence; when its turn fails, the run ends for the limit after all. No
// guard runs before that turn: the limits already ran out, and the turn is bounded by its own
// step timeout and, for cost, by the reserve the shell keeps for it on every earlier call (see
// Step.WrapUp and WrapUpAgent).

// wrappable are the limits a wrap-up agent answers for. The others (errors, loops, the
// transcript's size, an agent's own step limit) say the run went wrong, not that it ran long.
var wrappable = map[v1alpha1.TerminationReason]bool{
	v1alpha1.ReasonMaxStepsExceeded:    true,
	v1alpha1.ReasonMaxHandoffsExceeded: true,
	v1alpha1.ReasonTokenBudgetExceeded: true,
	v1alpha1.ReasonCostBudgetExceeded:  true,
	v1alpha1.ReasonTimeout:             true,
}

// WrapUpAgent is the agent of limits.wrapUp, or "" when the config has none.
func (p *Plan) WrapUpAgent() string {
	if w := p.Spec.Limits.WrapUp; w != nil && p.Agent(w.Agent) != nil {
		return w.Agent
	}
	return ""
}

// wrapUp gives the wrap-up agent the run's last turn when t is a limit it answers for and the
// run has not wrapped up yet, and reports whether it did. The guard that tripped is counted.
func wrapUp(p *Plan, d *Update, t Trip, now time.Time) bool {
	s := &d.Status
	agent := p.WrapUpAgent()
	if agent == "" || !wrappable[t.Reason] || s.WrappingUp != nil || s.Phase.Terminal() {
		return false
	}
	msg := statusText(t.Message, maxMessage)
	s.WrappingUp = &v1alpha1.WrappingUp{Limit: t.Reason, Message: msg}
	s.CurrentAgent = agent
	s.Input = LimitRanOut(t.Reason)
	d.Guard = t.Guard
	note := fmt.Sprintf("%s has the run's last turn: %s", agent, msg)
	setCondition(s, now, v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonWrappingUp, note)
	d.event(EventNormal, EventWrappingUp, "%s", note)
	return true
}

// LimitRanOut says in a few words which limit ran out: what the wrap-up agent is told. The
// evidence, which can be long, is in status.wrappingUp.
func LimitRanOut(reason v1alpha1.TerminationReason) string {
	limit := map[v1alpha1.TerminationReason]string{
		v1alpha1.ReasonMaxStepsExceeded:    "step limit (limits.maxSteps)",
		v1alpha1.ReasonMaxHandoffsExceeded: "handoff limit (limits.maxHandoffs)",
		v1alpha1.ReasonTokenBudgetExceeded: "token budget (limits.maxTokens)",
		v1alpha1.ReasonCostBudgetExceeded:  "cost budget (limits.maxCost)",
		v1alpha1.ReasonTimeout:             "time limit (limits.timeout)",
	}[reason]
	return "The run's " + firstNonEmpty(limit, string(reason)) + " ran out."
}

// endOrWrapUp ends the run for t, unless the wrap-up agent answers for it.
func endOrWrapUp(p *Plan, d *Update, t Trip, now time.Time) {
	if !wrapUp(p, d, t, now) {
		end(d, t, now)
	}
}

// wrapped classifies the wrap-up agent's turn: any answer ends the run WrappedUp and is its
// output (a handoff, a signal or a tool call it asked for is not followed); a failure ends it
// for the limit that ran out, with why the turn failed.
func wrapped(s *v1alpha1.AgentRunStatus, res StepResult) verdict {
	w := s.WrappingUp
	why := res.Error
	if res.Trip != nil {
		why = res.Trip.Message
	}
	if why != "" {
		return verdict{kind: resultFailed, res: res, route: route{
			end: w.Limit, outcome: v1alpha1.OutcomeFailed, failed: true, reason: statusText(why, maxReason),
			message: fmt.Sprintf("%s; the wrap-up turn of %s failed: %s", w.Message, res.Agent, why),
		}}
	}
	return verdict{kind: resultAnswered, res: res, output: res.Output, route: route{
		end: v1alpha1.ReasonWrappedUp, final: true, outcome: v1alpha1.OutcomeFinal,
		reason:  "wrapped up: " + w.Message,
		message: fmt.Sprintf("%s wrapped up the run after a limit ran out (%s)", res.Agent, w.Message),
	}}
}
