package agents

import (
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// RunRef names the run a request is for.
type RunRef struct {
	Namespace, Name, UID string
}

// NewRequest is what step's agent is asked, from the plan and the run's input: its spec, input
// and reason, the signals it may raise, the peers it may hand off to and, for a supervisor, the
// agents it routes to. A wrap-up turn is offered none of those; a fan-out only while the run may
// still start branches. The caller adds what the transcript holds (the context window, the
// answer a continuation or repair works on), the toolbox, and the seconds left.
func NewRequest(plan *workflow.Plan, run RunRef, task string, step workflow.Step) *Request {
	spec := plan.Agent(step.Agent)
	req := &Request{
		Namespace: run.Namespace,
		Run:       run.Name,
		RunUID:    run.UID,
		Step:      step.Number,
		Turn:      step.Turn,
		Attempt:   step.Attempt,
		Agent:     *spec,
		Task:      task,
		Input:     step.Input,
		Reason:    step.Reason,
		Signals:   plan.Spec.Signals,
		Left:      step.Left,
	}
	if step.WrapUp != nil {
		// The run's last turn: nothing to hand off to, route to or signal.
		req.WrapUp, req.Signals = workflow.LimitRanOut(step.WrapUp.Limit), nil
		return req
	}
	// The agent is offered as many branches as the run may still start, and none at its
	// deepest nesting or once its branches are spent.
	if p := req.Agent.Parallel; p != nil {
		if step.MaxBranches == 0 {
			req.Agent.Parallel = nil
		} else {
			capped := *p
			capped.MaxBranches = &step.MaxBranches
			req.Agent.Parallel = &capped
		}
	}
	for _, h := range spec.Handoffs {
		if peer := plan.Agent(h); peer != nil {
			req.Peers = append(req.Peers, Peer{Name: peer.Name, Description: peer.Description})
		}
	}
	if plan.Mode() == v1alpha1.ModeSupervisor && step.Agent == plan.Spec.Routing.Supervisor {
		for _, c := range plan.Children() {
			req.Children = append(req.Children, Peer{Name: c.Name, Description: c.Description})
		}
	}
	return req
}
