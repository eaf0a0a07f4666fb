package workflow

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// stateMachine routes on the config's states alone: the current state's agent takes the step,
// and the signal it emits picks the next state through the state's transitions. A state without
// an agent is final: the run ends there, and status.state says so. Agents' handoffs are not used.
type stateMachine struct{}

func (stateMachine) validate(p *Plan, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	states := path.Child("states")
	if len(p.Spec.States) == 0 {
		return append(errs, field.Required(states, "StateMachine mode needs at least one state"))
	}
	for i, s := range p.Spec.States {
		if s.Agent != "" && p.Agent(s.Agent) == nil {
			errs = append(errs, field.Invalid(states.Index(i).Child("agent"), s.Agent, "not the name of an agent in spec.agents"))
		}
		for _, sig := range sortedKeys(s.Transitions) {
			if _, ok := p.Signal(sig); !ok {
				errs = append(errs, field.Invalid(states.Index(i).Child("transitions").Key(sig), sig, "not a signal declared in spec.signals"))
			}
			if _, ok := p.State(s.Transitions[sig]); !ok {
				errs = append(errs, field.Invalid(states.Index(i).Child("transitions").Key(sig), s.Transitions[sig], "not the name of a state"))
			}
		}
		if _, ok := p.State(s.OnError); s.OnError != "" && !ok {
			errs = append(errs, field.Invalid(states.Index(i).Child("onError"), s.OnError, "not the name of a state"))
		}
	}
	return errs
}

func (stateMachine) start(p *Plan) (string, string) {
	first := p.Spec.States[0]
	return first.Agent, first.Name
}

func (stateMachine) route(p *Plan, st *v1alpha1.AgentRunStatus, res StepResult) route {
	r, handled := declaredSignal(p, res)
	state, _ := p.State(st.State)
	if handled {
		if target, ok := state.Transitions[res.Signal]; ok && r.end != "" {
			r.state = target // a signal that ends the run still moves the machine to its state
		}
		return r
	}
	next := route{signal: r.signal, events: r.events}
	if res.Signal == "" {
		next.fail = fmt.Sprintf("state %s: %s emitted no signal; expected one of %s", state.Name, res.Agent, transitions(state))
		return next
	}
	target, ok := state.Transitions[res.Signal]
	if !ok {
		next.fail = fmt.Sprintf("state %s has no transition on %s; expected one of %s", state.Name, res.Signal, transitions(state))
		return next
	}
	to, _ := p.State(target)
	next.outcome = v1alpha1.OutcomeSignal
	next.reason = fmt.Sprintf("%s: %s -> %s", res.Signal, state.Name, target)
	if to.Agent == "" {
		next.end, next.final, next.state = v1alpha1.ReasonCompleted, true, target
		next.message = fmt.Sprintf("reached final state %s on %s from %s", target, res.Signal, state.Name)
		return next
	}
	next.to, next.state = to.Agent, target
	next.input = res.Output
	next.handoff = true
	return next
}

func (stateMachine) recover(p *Plan, st *v1alpha1.AgentRunStatus, _ string) recovery {
	state, _ := p.State(st.State)
	to, ok := p.State(state.OnError)
	if state.OnError == "" || !ok || to.Agent == "" {
		return recovery{}
	}
	return recovery{to: to.Agent, state: to.Name, ok: true}
}

// transitions lists a state's signals for messages.
func transitions(s v1alpha1.State) string {
	if len(s.Transitions) == 0 {
		return "none (the state has no transitions)"
	}
	return strings.Join(sortedKeys(s.Transitions), ", ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
