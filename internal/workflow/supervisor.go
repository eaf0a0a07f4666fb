package workflow

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// supervisor lets one agent route: the supervisor's step returns a routing decision (target,
// confidence, reason, fallback) and the chosen child takes the next step. Below minConfidence
// the decision's fallback is used, else routing.defaultAgent. A child's answer goes back to the
// supervisor; a child may delegate further to its own handoffs, at most maxHandoffDepth deep. A
// failed child step goes back to the supervisor, which may re-route up to maxReroutes times in a
// row before the run ends RoutingExhausted.
type supervisor struct{}

// DefaultMinConfidence is routing.minConfidence when unset.
const DefaultMinConfidence = 0.7

// DefaultMaxReroutes is routing.maxReroutes when unset.
const DefaultMaxReroutes int32 = 3

func (supervisor) validate(p *Plan, path *field.Path) field.ErrorList {
	r := p.Spec.Routing
	if r == nil {
		return field.ErrorList{field.Required(path.Child("routing"), "Supervisor mode needs routing")}
	}
	var errs field.ErrorList
	if p.Agent(r.Supervisor) == nil {
		errs = append(errs, field.Invalid(path.Child("routing", "supervisor"), r.Supervisor, "not the name of an agent"))
	}
	if r.DefaultAgent != "" && (p.Agent(r.DefaultAgent) == nil || r.DefaultAgent == r.Supervisor) {
		errs = append(errs, field.Invalid(path.Child("routing", "defaultAgent"), r.DefaultAgent, "not the name of a child agent"))
	}
	return errs
}

func (supervisor) start(p *Plan) (string, string) {
	return p.Spec.Routing.Supervisor, p.Spec.Routing.Supervisor
}

// Children are the agents a supervisor may route to.
func (p *Plan) Children() []v1alpha1.Agent {
	var out []v1alpha1.Agent
	if p.Spec.Routing == nil {
		return out
	}
	for _, a := range p.Spec.Agents {
		if a.Name != p.Spec.Routing.Supervisor {
			out = append(out, a)
		}
	}
	return out
}

func (sv supervisor) route(p *Plan, st *v1alpha1.AgentRunStatus, res StepResult) route {
	r, handled := declaredSignal(p, res)
	if handled {
		return r
	}
	next := route{signal: r.signal, events: r.events}
	boss := p.Spec.Routing.Supervisor
	agent := p.Agent(res.Agent)
	switch {
	case res.Agent == boss && res.Routing != nil:
		return sv.routed(p, st, res, next)
	case res.Agent == boss && p.HasTerminator() && !agent.Terminator:
		next.fail = "the supervisor answered without a routing decision"
	case res.Agent == boss || agent.Terminator:
		next.end, next.final = v1alpha1.ReasonCompleted, true
		next.outcome = v1alpha1.OutcomeFinal
		next.reason = "final answer"
		next.message = fmt.Sprintf("%s gave the final answer", res.Agent)
	case res.Handoff != "":
		return delegated(p, st, res, next)
	default:
		next.to, next.state = boss, boss
		next.outcome = v1alpha1.OutcomeReturned
		next.reason = "answered; control returns to the supervisor"
		next.input = res.Output
		next.handoff = true
		next.counts = tally{depth: ptr.To[int32](0), reroutes: ptr.To[int32](0)}
	}
	return next
}

// routed hands control to the child the supervisor's routing decision picks, one level deep.
func (sv supervisor) routed(p *Plan, st *v1alpha1.AgentRunStatus, res StepResult, next route) route {
	to, why, ok := sv.choose(p, res.Routing)
	if !ok {
		next.fail = why
		return next
	}
	next.to, next.state = to, to
	next.outcome = v1alpha1.OutcomeHandoff
	next.reason = why
	next.confidence = res.Routing.Confidence
	next.input = firstNonEmpty(res.Output, st.Input)
	next.handoff = true
	next.counts.depth = ptr.To[int32](1)
	return next
}

// delegated hands control from a child to one of its handoffs, one level deeper, unless that
// passes maxHandoffDepth.
func delegated(p *Plan, st *v1alpha1.AgentRunStatus, res StepResult, next route) route {
	switch {
	case !p.CanHandOff(res.Agent, res.Handoff):
		next.fail = fmt.Sprintf("delegation to %s refused: not in the handoffs of %s", quoteName(res.Handoff), res.Agent)
	case st.Depth+1 > p.Limits.MaxHandoffDepth:
		next.fail = fmt.Sprintf("delegation to %s refused: depth %d would pass maxHandoffDepth %d", res.Handoff, st.Depth+1, p.Limits.MaxHandoffDepth)
	}
	if next.fail != "" {
		next.events = append(next.events, Event{Type: EventWarning, Reason: EventHandoffRefused, Message: next.fail})
		return next
	}
	next.to, next.state = res.Handoff, res.Handoff
	next.outcome = v1alpha1.OutcomeHandoff
	next.reason = firstNonEmpty(res.Reason, "delegated")
	next.input = res.Output
	next.handoff = true
	next.counts.depth = ptr.To(st.Depth + 1)
	return next
}

// choose applies the routing rules to a decision: a known target at or above minConfidence,
// else the decision's fallback, else routing.defaultAgent.
func (supervisor) choose(p *Plan, d *v1alpha1.RoutingDecision) (agent, why string, ok bool) {
	r := p.Spec.Routing
	minimum := DefaultMinConfidence
	if r.MinConfidence != nil {
		minimum = *r.MinConfidence
	}
	child := func(name string) bool { return name != "" && name != r.Supervisor && p.Agent(name) != nil }
	// A decision that states no confidence is not a confident one.
	confidence := 0.0
	if d.Confidence != nil {
		confidence = *d.Confidence
	}
	reason := statusText(d.Reason, 120)
	switch {
	case child(d.Target) && confidence >= minimum:
		return d.Target, fmt.Sprintf("routed to %s (confidence %.2f): %s", d.Target, confidence, reason), true
	case !child(d.Target):
		why = fmt.Sprintf("target %s is not a child agent", quoteName(d.Target))
	default:
		why = fmt.Sprintf("confidence %.2f for %s is below minConfidence %.2f", confidence, d.Target, minimum)
	}
	switch {
	case child(d.Fallback):
		return d.Fallback, fmt.Sprintf("fallback %s: %s", d.Fallback, why), true
	case child(r.DefaultAgent):
		return r.DefaultAgent, fmt.Sprintf("default agent %s: %s", r.DefaultAgent, why), true
	}
	return "", fmt.Sprintf("routing decision unusable: %s, and no fallback or defaultAgent", why), false
}

func (supervisor) recover(p *Plan, st *v1alpha1.AgentRunStatus, failed string) recovery {
	r := p.Spec.Routing
	if failed == r.Supervisor {
		return recovery{}
	}
	maxReroutes := DefaultMaxReroutes
	if r.MaxReroutes != nil {
		maxReroutes = *r.MaxReroutes
	}
	// The failed child's delegation ends: control goes back to the supervisor, or nowhere.
	reroutes := st.Reroutes + 1
	counts := tally{depth: ptr.To[int32](0), reroutes: &reroutes}
	if reroutes > maxReroutes {
		return recovery{counts: counts, end: v1alpha1.ReasonRoutingExhausted, message: fmt.Sprintf(
			"routing exhausted: %d child steps failed in a row, more than maxReroutes %d; last: %s", reroutes, maxReroutes, failed)}
	}
	return recovery{to: r.Supervisor, state: r.Supervisor, ok: true, counts: counts}
}
