package workflow

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// swarm lets each agent hand off to the agents in its handoffs; the entrypoint takes control
// back when an agent answers without a handoff, and recovers failed steps.
type swarm struct{}

func (swarm) validate(*Plan, *field.Path) field.ErrorList { return nil }

func (swarm) start(p *Plan) (string, string) { return p.Entrypoint(), p.Entrypoint() }

func (swarm) route(p *Plan, _ *v1alpha1.AgentRunStatus, res StepResult) route {
	r, handled := declaredSignal(p, res)
	if handled {
		return r
	}
	// An ignored or routing-only signal is still recorded, with its Events.
	next := route{signal: r.signal, events: r.events}

	switch {
	case res.Handoff != "" && !p.CanHandOff(res.Agent, res.Handoff):
		next.fail = fmt.Sprintf("handoff to %s refused: not in the handoffs of %s", quoteName(res.Handoff), res.Agent)
		next.events = append(next.events, Event{Type: EventWarning, Reason: EventHandoffRefused, Message: next.fail})
	case res.Handoff != "":
		next.to, next.state = res.Handoff, res.Handoff
		next.outcome = v1alpha1.OutcomeHandoff
		next.reason = firstNonEmpty(res.Reason, "handoff")
		next.input = res.Output
		next.handoff = true
	case p.Agent(res.Agent).Terminator || !p.HasTerminator() || p.depth > 0:
		next.end = v1alpha1.ReasonCompleted
		next.final = true
		next.outcome = v1alpha1.OutcomeFinal
		next.reason = "final answer"
		switch {
		case p.depth > 0:
			next.message = fmt.Sprintf("%s gave the branch's answer", res.Agent)
		case p.Agent(res.Agent).Terminator:
			next.message = fmt.Sprintf("terminator %s gave the final answer", res.Agent)
		default:
			next.message = fmt.Sprintf("%s gave the final answer (the config has no terminator)", res.Agent)
		}
	default:
		next.to, next.state = p.Entrypoint(), p.Entrypoint()
		next.outcome = v1alpha1.OutcomeReturned
		next.reason = "answered without a handoff; control returns to the entrypoint"
		next.input = res.Output
		next.handoff = true
	}
	return next
}

func (swarm) recover(p *Plan, _ *v1alpha1.AgentRunStatus, failed string) recovery {
	if failed == p.Entrypoint() {
		return recovery{}
	}
	return recovery{to: p.Entrypoint(), state: p.Entrypoint(), ok: true}
}
