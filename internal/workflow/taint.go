package workflow

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Taint in the pure core: where untrusted content came into a run's context, and what a tainted
// run's calls of tools with side effects meet. A run is tainted from the first step whose
// context held untrusted content (an Untrusted tool server's result, an Untrusted agent's
// answer, an untrusted input, or what it inherited) and stays tainted: the taint is in its
// status and in the step records, so a restart, a summary or a copy never drops it.

// maxTaintSource bounds a taint's source in status.
const maxTaintSource = 256

// TaintedWhy is what the model is told of a tainted call that is refused.
const TaintedWhy = "refused: untrusted content in context"

// ToolUntrusted reports whether the server's results may carry instructions from outside.
func (p *Plan) ToolUntrusted(server string) bool {
	s, ok := p.ToolServer(server)
	return ok && s.Trust == v1alpha1.Untrusted
}

// AgentUntrusted reports whether the agent's answers may carry instructions from outside.
func (p *Plan) AgentUntrusted(agent string) bool {
	a := p.Agent(agent)
	return a != nil && a.Model.Trust == v1alpha1.Untrusted
}

// InputUntrusted reports whether runs' inputs are untrusted.
func (p *Plan) InputUntrusted() bool {
	return p.Spec.Untrusted != nil && p.Spec.Untrusted.Input == v1alpha1.Untrusted
}

// OnSideEffect is what a tainted call of a tool with side effects meets.
func (p *Plan) OnSideEffect() v1alpha1.SideEffectPolicy {
	if u := p.Spec.Untrusted; u != nil && u.OnSideEffect == v1alpha1.SideEffectRefuse {
		return v1alpha1.SideEffectRefuse
	}
	return v1alpha1.SideEffectGate
}

// TaintGate is the gate a tainted call of the tool waits at: the tool's gate's quorum and
// timeout, and a timeout that always rejects (the call is never made without a person).
func (p *Plan) TaintGate(agent, server, tool string) v1alpha1.ApprovalGate {
	t, ok := p.AgentTools(agent, server)
	if !ok {
		t = v1alpha1.AgentTools{Server: server}
	}
	return ToolGateOf(t, tool, true)
}

// CallGate is the gate a call waits at, if any. A tainted call of a tool with side effects waits
// at its taint gate under onSideEffect Gate, and at that gate only, whatever the tool's own
// approval says: one decision covers both. Any other call waits at its tool's gate, if the
// tool has one.
func (p *Plan) CallGate(agent, server, tool string, tainted bool) (v1alpha1.ApprovalGate, bool) {
	if tainted && p.SideEffects(agent, server) && p.OnSideEffect() == v1alpha1.SideEffectGate {
		return p.TaintGate(agent, server, tool), true
	}
	return p.ToolGate(agent, server, tool)
}

// RefusesTainted reports whether a call is refused for the taint in its context: a tainted
// call of a tool with side effects, under onSideEffect Refuse.
func (p *Plan) RefusesTainted(agent, server string, tainted bool) bool {
	return tainted && p.SideEffects(agent, server) && p.OnSideEffect() == v1alpha1.SideEffectRefuse
}

// ToolTaint is the taint a result of the server's tool brings into the step's context, if the
// server is untrusted.
func (p *Plan) ToolTaint(server, tool string, step int32) *v1alpha1.Taint {
	if !p.ToolUntrusted(server) {
		return nil
	}
	return &v1alpha1.Taint{Source: taintSource("tool %s/%s", server, tool), Step: step}
}

// InputTaint is the taint of a run's input, when inputs are untrusted.
func (p *Plan) InputTaint() *v1alpha1.Taint {
	if !p.InputUntrusted() {
		return nil
	}
	return &v1alpha1.Taint{Source: "input"}
}

// Inherited is a taint a run takes from another (its parent, its session's earlier turn, the
// run it starts from), saying where: it came in before the run's first step.
func Inherited(t *v1alpha1.Taint, from string) *v1alpha1.Taint {
	if t == nil {
		return nil
	}
	return &v1alpha1.Taint{Source: taintSource("%s: %s", from, t.Source)}
}

// TaintedBefore is the earlier run's taint, if it came in at or before step: a run started from
// that step inherits it.
func TaintedBefore(t *v1alpha1.Taint, step int32) *v1alpha1.Taint {
	if t == nil || t.Step > step {
		return nil
	}
	return t
}

// taint keeps the first taint of the run: once tainted, it stays as it first was.
func taint(s *v1alpha1.AgentRunStatus, t *v1alpha1.Taint) {
	if s.Taint == nil && t != nil {
		c := *t
		s.Taint = &c
	}
}

// stepTaint is the taint a step's result brings: what its tools brought, or, from an untrusted
// agent, its answer.
func stepTaint(p *Plan, res StepResult, step int32) *v1alpha1.Taint {
	if res.Taint != nil {
		return res.Taint
	}
	if res.Error == "" && p.AgentUntrusted(res.Agent) {
		return &v1alpha1.Taint{Source: taintSource("agent %s", res.Agent), Step: step}
	}
	return nil
}

func taintSource(format string, args ...any) string {
	return statusText(fmt.Sprintf(format, args...), maxTaintSource)
}

// checkTrust checks what the API server's rules check of trust, for configs stored before them:
// only HTTP and A2A agents' answers come from outside.
func (p *Plan) checkTrust(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range p.Spec.Agents {
		switch a.Model.Provider {
		case v1alpha1.ProviderHTTP, v1alpha1.ProviderA2A:
			continue
		}
		if a.Model.Trust == v1alpha1.Untrusted {
			errs = append(errs, field.Invalid(path.Child("agents").Index(i).Child("model", "trust"), a.Model.Trust,
				"Untrusted applies to HTTP and A2A agents, whose answers come from outside; mark a tool server Untrusted for what a model reads"))
		}
	}
	return errs
}
