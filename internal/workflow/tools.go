package workflow

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Tools in the pure core: which tools an agent may call, the gates that hold calls back, and
// the guards checked before every call (the run's limits.maxToolCalls and the repeated-call
// detector). The controller makes the calls; these functions decide.

// ToolServer returns the config's tool server of that name.
func (p *Plan) ToolServer(name string) (v1alpha1.ToolServer, bool) {
	for _, s := range p.Spec.ToolServers {
		if s.Name == name {
			return s, true
		}
	}
	return v1alpha1.ToolServer{}, false
}

// AgentTools returns the agent's tools entry for a server.
func (p *Plan) AgentTools(agent, server string) (v1alpha1.AgentTools, bool) {
	a := p.agents[agent]
	if a == nil {
		return v1alpha1.AgentTools{}, false
	}
	for _, t := range a.Tools {
		if t.Server == server {
			return t, true
		}
	}
	return v1alpha1.AgentTools{}, false
}

// ToolAllowed reports whether the agent may call the tool of the server.
func (p *Plan) ToolAllowed(agent, server, tool string) bool {
	t, ok := p.AgentTools(agent, server)
	return ok && (len(t.Allow) == 0 || slices.Contains(t.Allow, tool))
}

// ToolGate is the gate a call of the tool waits at, if its calls need approval. Tool gates
// hold whatever the run's approvals policy: they guard what a tool does, not the workflow.
func (p *Plan) ToolGate(agent, server, tool string) (v1alpha1.ApprovalGate, bool) {
	t, ok := p.AgentTools(agent, server)
	if !ok || t.Approval != v1alpha1.ToolApprovalRequired {
		return v1alpha1.ApprovalGate{}, false
	}
	return ToolGateOf(t, tool, false), true
}

// ToolGateOf is the gate a call of the tool waits at as the agent's tools entry t sets it up:
// the tool's gate (tool/<server>/<tool>), or with taint its taint gate (taint/<server>/<tool>).
// One approver unless the entry says more; a taint gate's timeout always rejects.
func ToolGateOf(t v1alpha1.AgentTools, tool string, taint bool) v1alpha1.ApprovalGate {
	g := v1alpha1.ApprovalGate{Name: v1alpha1.ToolGateName(t.Server, tool), Required: 1, OnTimeout: "Reject"}
	if taint {
		g.Name = v1alpha1.TaintGateName(t.Server, tool)
	}
	if t.Gate != nil {
		g.Required, g.Timeout, g.Remind, g.Escalate = max(t.Gate.Required, 1), t.Gate.Timeout, t.Gate.Remind, t.Gate.Escalate
		if t.Gate.OnTimeout != "" && !taint {
			g.OnTimeout = t.Gate.OnTimeout
		}
	}
	return g
}

// ToolGateNamed splits the name of a tool's gate or a taint gate into its server and tool, and
// says which it is; ok is false for any other name.
func ToolGateNamed(name string) (server, tool string, taint, ok bool) {
	rest, taint := strings.CutPrefix(name, v1alpha1.TaintGatePrefix)
	if !taint {
		if rest, ok = strings.CutPrefix(name, v1alpha1.ToolGatePrefix); !ok {
			return "", "", false, false
		}
	}
	server, tool, ok = strings.Cut(rest, "/")
	return server, tool, taint, ok
}

// toolGateNamed is the tool gate, or the taint gate, of that name for the agent, if the name is
// one's.
func (p *Plan) toolGateNamed(agent, name string) (v1alpha1.ApprovalGate, bool) {
	server, tool, taint, ok := ToolGateNamed(name)
	switch {
	case !ok:
		return v1alpha1.ApprovalGate{}, false
	case taint && !p.SideEffects(agent, server):
		return v1alpha1.ApprovalGate{}, false
	case taint:
		return p.TaintGate(agent, server, tool), true
	}
	return p.ToolGate(agent, server, tool)
}

// SideEffects reports whether the agent's calls of the server's tools change the world.
func (p *Plan) SideEffects(agent, server string) bool {
	t, ok := p.AgentTools(agent, server)
	return ok && t.SideEffects
}

// checkTools checks what the API server's rules check of tools, for configs stored before
// them, and compiles the HTTP tools' schemas.
func (p *Plan) checkTools(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range p.Spec.ToolServers {
		sp := path.Child("toolServers").Index(i)
		if (s.MCP == nil) == (s.HTTP == nil) {
			errs = append(errs, field.Invalid(sp, s.Name, "exactly one of mcp and http must be set"))
		}
		if s.HTTP == nil {
			continue
		}
		for name, sch := range map[string][]byte{"inputSchema": rawOf(s.HTTP.InputSchema), "outputSchema": rawOf(s.HTTP.OutputSchema)} {
			if len(sch) == 0 {
				continue
			}
			if _, err := CompileSchema("baton:///toolServers/"+s.Name+"/"+name+".json", sch); err != nil {
				errs = append(errs, field.Invalid(sp.Child("http", name), "", err.Error()))
			}
		}
	}
	for i, a := range p.Spec.Agents {
		ap := path.Child("agents").Index(i)
		for j, t := range a.Tools {
			if _, ok := p.ToolServer(t.Server); !ok {
				errs = append(errs, field.Invalid(ap.Child("tools").Index(j).Child("server"), t.Server, "not the name of an entry in spec.toolServers"))
			}
		}
		for j, turn := range a.Script {
			for k, c := range turn.ToolCalls {
				if _, ok := p.AgentTools(a.Name, c.Server); !ok {
					errs = append(errs, field.Invalid(ap.Child("script").Index(j).Child("toolCalls").Index(k).Child("server"), c.Server, "not one of the agent's tools[].server"))
				}
			}
		}
	}
	return errs
}

// ToolUse is one tool call as the guards see it: the tool, a digest of its arguments, and the
// step that asked for it; Malformed when its arguments are not a JSON object.
type ToolUse struct {
	Server    string `json:"server"`
	Tool      string `json:"tool"`
	Digest    string `json:"digest"`
	Step      int32  `json:"step"`
	Malformed bool   `json:"malformed,omitempty"`
}

func (u ToolUse) key() string { return u.Server + "/" + u.Tool + "#" + u.Digest }

// maxToolUseSteps bounds the steps kept as evidence for one repeated call.
const maxToolUseSteps = 16

// ToolUses counts a run's tool calls by tool and arguments, with the steps that asked for them.
type ToolUses struct {
	calls map[string]*toolUses
}

type toolUses struct {
	count int32
	steps []int32
}

// Add counts a call that passed the guards.
func (u *ToolUses) Add(use ToolUse) {
	if u.calls == nil {
		u.calls = map[string]*toolUses{}
	}
	c := u.calls[use.key()]
	if c == nil {
		c = &toolUses{}
		u.calls[use.key()] = c
	}
	c.count++
	if len(c.steps) < maxToolUseSteps {
		c.steps = append(c.steps, use.Step)
	}
}

// Clone copies the counts.
func (u *ToolUses) Clone() *ToolUses {
	c := &ToolUses{calls: make(map[string]*toolUses, len(u.calls))}
	for k, v := range u.calls {
		c.calls[k] = &toolUses{count: v.count, steps: slices.Clone(v.steps)}
	}
	return c
}

// Count is how many calls of the tool with these arguments were counted.
func (u *ToolUses) Count(use ToolUse) int32 {
	if c := u.calls[use.key()]; c != nil {
		return c.count
	}
	return 0
}

// CheckToolCall is the guard before each tool call. made is the calls the run made before this
// one; uses are the calls that passed this guard before. The call would be the run's call
// made+1: past limits.maxToolCalls, the run ends ToolCallLimitExceeded; when the same tool was
// already called with the same arguments loopDetection.maxRepeatedToolCalls times, the run
// ends LoopDetected (RepeatedToolCall) with the tool and the steps.
func CheckToolCall(p *Plan, made int32, uses *ToolUses, next ToolUse) (Trip, bool) {
	tool := next.Server + "/" + next.Tool
	if made >= p.Limits.MaxToolCalls {
		return guarded(Trip{Reason: v1alpha1.ReasonToolCallLimitExceeded, Message: fmt.Sprintf(
			"limits.maxToolCalls %d reached: step %d asked for another call (%s) after the run's %d calls",
			p.Limits.MaxToolCalls, next.Step, tool, made)}), true
	}
	c := uses.calls[next.key()]
	if c == nil || c.count < p.Loops.MaxRepeatedToolCalls {
		return Trip{}, false
	}
	steps := append(slices.Clone(c.steps), next.Step)
	return guarded(Trip{
		Reason: v1alpha1.ReasonLoopDetected,
		Message: fmt.Sprintf("RepeatedToolCall: %s called with the same arguments %d times (steps %s) and asked for again at step %d, more than loopDetection.maxRepeatedToolCalls %d",
			tool, c.count, joinSteps(c.steps), next.Step, p.Loops.MaxRepeatedToolCalls),
		Loop: &v1alpha1.LoopStatus{Detector: v1alpha1.DetectorRepeatedToolCall, Pattern: []string{statusText(tool, 200)}, Steps: steps},
	}), true
}

func joinSteps(steps []int32) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}

func rawOf(j *apiextensionsv1.JSON) []byte {
	if j == nil {
		return nil
	}
	return j.Raw
}

// hold applies a step that stopped at a tool call waiting for approval: the tokens and calls
// it used so far count, and the run waits at the tool's gate. The step is not over: once the
// gate is decided, the same step goes on.
func hold(p *Plan, st v1alpha1.AgentRunStatus, res StepResult, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	before, beforeCost := s.TokensUsed, Spent(s)
	s.TokensUsed += res.Tokens - res.CountedTokens
	addCost(s, res.Result)
	s.ToolCalls += res.ToolCalls - res.CountedToolCalls
	warnTokens(p, &d, before, now)
	warnCost(p, &d, beforeCost, now)
	if t, ok := check(p, s, now); ok {
		end(&d, t, now)
		return d
	}
	taint(s, res.Taint)
	if res.Held.Guard != nil {
		holdGuard(p, &d, res, now)
		return d
	}
	call := res.Held.Call
	g, ok := p.gate(res.Agent, res.Held.Gate)
	if !ok {
		g, _ = p.gateAt(stop{kind: stopToolCall, agent: res.Agent, call: &call})
	}
	holdToolCall(p, &d, g, pendingCallOf(res.Held, s.StepCount+1), now)
	return d
}

// pendingCallOf is the call a step held at step asks for, as status shows it: its arguments
// and the taint's source bounded.
func pendingCallOf(h *Held, step int32) v1alpha1.PendingToolCall {
	c := h.Call
	return v1alpha1.PendingToolCall{Server: c.Server, Tool: c.Tool, Step: step, Call: c.Index,
		Arguments: statusText(string(c.Arguments), maxValue), Taint: statusText(h.Taint, maxTaintSource)}
}
