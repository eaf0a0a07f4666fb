package runview

import (
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Reaching says how a gate that has waited since since reaches people by now: its reminders
// (how many were due, and when the next is) and its escalation (when, to whom). It is worked
// out from the gate's spec, as the notifier works them out: nothing of it is in the run.
func Reaching(g *v1alpha1.ApprovalGate, since, now time.Time) []string {
	if g == nil {
		return nil
	}
	var out []string
	waited := now.Sub(since)
	if r := g.Remind; r != nil && r.Every.OrZero() > 0 {
		every := r.Every.OrZero()
		n := int64(waited / every)
		next := since.Add(time.Duration(n+1) * every)
		out = append(out, fmt.Sprintf("reminders every %s: %d so far, the next at %s", every, n, next.Local().Format(time.TimeOnly)))
	}
	if e := g.Escalate; e != nil {
		at := since.Add(e.After.OrZero())
		verb := "escalates at"
		if !now.Before(at) {
			verb = "escalated at"
		}
		out = append(out, fmt.Sprintf("%s %s%s", verb, at.Local().Format(time.TimeOnly), to(e.To)))
	}
	return out
}

func to(d v1alpha1.Deciders) string {
	var parts []string
	if len(d.Users) > 0 {
		parts = append(parts, "users "+strings.Join(d.Users, ", "))
	}
	if len(d.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(d.Groups, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", to " + strings.Join(parts, " and ") + " (who may decide with the approve verb)"
}

// GateSpec is the spec of the gate of that name a run whose agent has control waits at: one of
// the config's gates, or a tool's gate (tool/<server>/<tool>) or taint gate
// (taint/<server>/<tool>) from the agent's tools entry, with their defaults; nil when there is
// none.
func GateSpec(cfg *v1alpha1.AgentConfig, agent, name string) *v1alpha1.ApprovalGate {
	if cfg == nil {
		return nil
	}
	for i := range cfg.Spec.Approvals {
		if cfg.Spec.Approvals[i].Name == name {
			return &cfg.Spec.Approvals[i]
		}
	}
	return toolGateSpec(cfg, agent, name)
}

// toolGateSpec is a tool's gate or taint gate, as the operator sets it up from the agent's
// tools entry (workflow.ToolGateOf).
func toolGateSpec(cfg *v1alpha1.AgentConfig, agent, name string) *v1alpha1.ApprovalGate {
	server, tool, taint, ok := workflow.ToolGateNamed(name)
	if !ok {
		return nil
	}
	for _, a := range cfg.Spec.Agents {
		if a.Name != agent {
			continue
		}
		for _, t := range a.Tools {
			if t.Server == server {
				g := workflow.ToolGateOf(t, tool, taint)
				return &g
			}
		}
	}
	return nil
}
