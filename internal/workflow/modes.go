package workflow

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// mode is one way of deciding who acts next. A new mode is one more entry in modes. A mode
// reads the run's status and never writes it: what a step changes, it returns, and Apply
// writes it in one place (record).
type mode interface {
	// validate checks what the mode needs of the config.
	validate(p *Plan, path *field.Path) field.ErrorList
	// start is the agent and state a run starts with.
	start(p *Plan) (agent, state string)
	// route decides where control goes after a step that did not fail.
	route(p *Plan, st *v1alpha1.AgentRunStatus, res StepResult) route
	// recover is who takes over after a failed step.
	recover(p *Plan, st *v1alpha1.AgentRunStatus, failed string) recovery
}

// recovery is who takes over after a failed step. With ok false, no one can: the run ends with
// end (when set) or with AgentTimeout or TooManyErrors.
type recovery struct {
	to, state string
	ok        bool
	end       v1alpha1.TerminationReason
	message   string
	// counts is what the failure changes of the mode's counts.
	counts tally
}

// tally is what a step changes of the counts a mode keeps in status: a supervisor's delegation
// depth (status.depth) and the child steps that failed in a row (status.reroutes). A nil field
// leaves its count as it is.
type tally struct {
	depth    *int32
	reroutes *int32
}

// apply writes the counts into the status.
func (t tally) apply(s *v1alpha1.AgentRunStatus) {
	if t.depth != nil {
		s.Depth = *t.depth
	}
	if t.reroutes != nil {
		s.Reroutes = *t.reroutes
	}
}

var modes = map[v1alpha1.WorkflowMode]mode{
	v1alpha1.ModeSwarm:        swarm{},
	v1alpha1.ModeStateMachine: stateMachine{},
	v1alpha1.ModeSupervisor:   supervisor{},
}

// route is where a mode sends a run at the end of one step.
type route struct {
	// end, when set, ends the run with this reason and message.
	end     v1alpha1.TerminationReason
	message string
	// final makes the step's output the run's output.
	final bool
	// to is the agent that has control next, and state the run's state.
	to    string
	state string
	// outcome and reason are recorded in the handoff sequence.
	outcome v1alpha1.StepOutcome
	reason  string
	// signal is the declared signal the step emitted.
	signal string
	// input is what the next agent is given.
	input string
	// handoff counts the move of control as a handoff.
	handoff bool
	// await pauses the run until a person replies to the agent.
	await bool
	// confidence is a supervisor's confidence in the routing, recorded with the step.
	confidence *float64
	// fail, when set, makes the step a failed step for this reason (see failStep).
	fail string
	// failed counts the step as failed, against limits.maxErrors: failStep sets it.
	failed bool
	// counts is what the step changes of the mode's counts.
	counts tally
	events []Event
	// branches are the branches a fan-out starts (branches.go).
	branches []Branch
}

// signalAction decides what a declared signal does. handled is false when the step should be
// routed as if the signal were not there.
type signalAction func(p *Plan, res StepResult, sig v1alpha1.Signal) (r route, handled bool)

var signalActions = map[v1alpha1.SignalAction]signalAction{
	v1alpha1.ActionTerminate: terminateSignal,
	v1alpha1.ActionComplete:  completeSignal,
	v1alpha1.ActionNone:      noneSignal,
	v1alpha1.ActionAwaitInput: func(_ *Plan, _ StepResult, sig v1alpha1.Signal) (route, bool) {
		return route{await: true, outcome: v1alpha1.OutcomeSignal, reason: sig.Name, signal: sig.Name}, true
	},
}

func terminateSignal(p *Plan, res StepResult, sig v1alpha1.Signal) (route, bool) {
	if a := p.Agent(res.Agent); a == nil || !a.Terminator {
		return route{signal: sig.Name, events: []Event{{
			Type:    EventWarning,
			Reason:  EventTerminateIgnored,
			Message: fmt.Sprintf("agent %s emitted %s (Terminate) but is not a terminator; the signal was ignored", res.Agent, sig.Name),
		}}}, false
	}
	return route{
		end:     v1alpha1.ReasonTerminated,
		message: fmt.Sprintf("terminator %s emitted %s", res.Agent, sig.Name),
		final:   true,
		outcome: v1alpha1.OutcomeSignal,
		reason:  sig.Name,
		signal:  sig.Name,
	}, true
}

func completeSignal(_ *Plan, res StepResult, sig v1alpha1.Signal) (route, bool) {
	return route{
		end:     v1alpha1.ReasonCompleted,
		message: fmt.Sprintf("agent %s emitted %s (Complete)", res.Agent, sig.Name),
		final:   true,
		outcome: v1alpha1.OutcomeSignal,
		reason:  sig.Name,
		signal:  sig.Name,
	}, true
}

func noneSignal(_ *Plan, _ StepResult, sig v1alpha1.Signal) (route, bool) {
	return route{signal: sig.Name}, false
}

// declaredSignal applies the step's signal, if it is declared. Undeclared signals do not count.
func declaredSignal(p *Plan, res StepResult) (route, bool) {
	if res.Signal == "" {
		return route{}, false
	}
	sig, ok := p.Signal(res.Signal)
	if !ok {
		return route{}, false
	}
	act, ok := signalActions[sig.Action]
	if !ok {
		return route{signal: sig.Name}, false
	}
	return act(p, res, sig)
}
