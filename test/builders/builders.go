// Package builders makes AgentConfigs and AgentRuns for tests, so that a test reads as intent:
//
//	MakeRun("r", "ns").Config("helpdesk").Input("Ticket 1").Obj()
package builders

import (
	"strconv"
	"time"

	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// ConfigWrapper builds an AgentConfig.
type ConfigWrapper struct{ v1alpha1.AgentConfig }

// MakeConfig starts a Swarm config.
func MakeConfig(name, namespace string) *ConfigWrapper {
	w := &ConfigWrapper{}
	w.APIVersion, w.Kind = v1alpha1.GroupVersion.String(), "AgentConfig"
	w.Name, w.Namespace = name, namespace
	w.Spec.Mode = v1alpha1.ModeSwarm
	return w
}

// Obj returns the config.
func (w *ConfigWrapper) Obj() *v1alpha1.AgentConfig { return w.AgentConfig.DeepCopy() }

// Mode sets the workflow mode.
func (w *ConfigWrapper) Mode(m v1alpha1.WorkflowMode) *ConfigWrapper { w.Spec.Mode = m; return w }

// Entrypoint sets the entrypoint.
func (w *ConfigWrapper) Entrypoint(name string) *ConfigWrapper { w.Spec.Entrypoint = name; return w }

// Agents adds agents; the first added becomes the entrypoint unless one is set.
func (w *ConfigWrapper) Agents(agents ...*AgentWrapper) *ConfigWrapper {
	for _, a := range agents {
		w.Spec.Agents = append(w.Spec.Agents, *a.Agent.DeepCopy())
	}
	if w.Spec.Entrypoint == "" && len(w.Spec.Agents) > 0 {
		w.Spec.Entrypoint = w.Spec.Agents[0].Name
	}
	return w
}

// Signal declares a signal.
func (w *ConfigWrapper) Signal(name string, action v1alpha1.SignalAction) *ConfigWrapper {
	w.Spec.Signals = append(w.Spec.Signals, v1alpha1.Signal{Name: name, Action: action})
	return w
}

// State adds a StateMachine state; transitions maps signals to states.
func (w *ConfigWrapper) State(name, agent string, transitions map[string]string) *ConfigWrapper {
	w.Spec.States = append(w.Spec.States, v1alpha1.State{Name: name, Agent: agent, Transitions: transitions})
	return w
}

// Allow lets the cycle of agents repeat up to maxRepeats times.
func (w *ConfigWrapper) Allow(maxRepeats int32, cycle ...string) *ConfigWrapper {
	w.Spec.LoopDetection.Allow = append(w.Spec.LoopDetection.Allow, v1alpha1.AllowedCycle{Cycle: cycle, MaxRepeats: maxRepeats})
	return w
}

// LoopDetection sets the loop detectors' settings; nil leaves a setting at its default.
func (w *ConfigWrapper) LoopDetection(window, minUnique, cycleRepeats, repeatedInputs, repeatedOutputs *int32) *ConfigWrapper {
	l := &w.Spec.LoopDetection
	l.Window, l.MinUniqueAgents, l.MaxCycleRepeats = window, minUnique, cycleRepeats
	l.MaxRepeatedInputs, l.MaxRepeatedOutputs = repeatedInputs, repeatedOutputs
	return w
}

// Gate adds a human gate that opens after the agent's step ("Complete": before the run
// completes), needing required approvals.
func (w *ConfigWrapper) Gate(name, after string, required int32) *ConfigWrapper {
	g := v1alpha1.ApprovalGate{Name: name, After: after, Required: required, OnTimeout: "Reject"}
	if after == "Complete" {
		g.After, g.Before = "", "Complete"
	}
	w.Spec.Approvals = append(w.Spec.Approvals, g)
	return w
}

// GateTimeout sets the timeout of the named gate and what happens then (Reject or Approve).
func (w *ConfigWrapper) GateTimeout(name string, d time.Duration, onTimeout string) *ConfigWrapper {
	for i := range w.Spec.Approvals {
		if w.Spec.Approvals[i].Name == name {
			w.Spec.Approvals[i].Timeout = v1alpha1.NewDuration(d)
			w.Spec.Approvals[i].OnTimeout = onTimeout
		}
	}
	return w
}

// AllowSelfApproval sets whether the run's creator may approve at the named gate.
func (w *ConfigWrapper) AllowSelfApproval(name string, allow bool) *ConfigWrapper {
	for i := range w.Spec.Approvals {
		if w.Spec.Approvals[i].Name == name {
			w.Spec.Approvals[i].AllowSelfApproval = ptr.To(allow)
		}
	}
	return w
}

// TTL sets the config's default ttlSecondsAfterFinished.
func (w *ConfigWrapper) TTL(seconds int32) *ConfigWrapper {
	w.Spec.TTLSecondsAfterFinished = &seconds
	return w
}

// MaxHandoffs sets limits.maxHandoffs.
func (w *ConfigWrapper) MaxHandoffs(n int32) *ConfigWrapper { w.Spec.Limits.MaxHandoffs = &n; return w }

// Untrusted says whether the runs' inputs are untrusted.
func (w *ConfigWrapper) Untrusted(input v1alpha1.Trust) *ConfigWrapper {
	if w.Spec.Untrusted == nil {
		w.Spec.Untrusted = &v1alpha1.UntrustedSpec{}
	}
	w.Spec.Untrusted.Input = input
	return w
}

// MaxSteps sets limits.maxSteps.
func (w *ConfigWrapper) MaxSteps(n int32) *ConfigWrapper { w.Spec.Limits.MaxSteps = &n; return w }

// MaxTokens sets limits.maxTokens.
func (w *ConfigWrapper) MaxTokens(n int64) *ConfigWrapper { w.Spec.Limits.MaxTokens = &n; return w }

// MaxCost sets limits.maxCost, a decimal string.
func (w *ConfigWrapper) MaxCost(amount string) *ConfigWrapper {
	w.Spec.Limits.MaxCost = &amount
	return w
}

// WrapUp sets limits.wrapUp: agent has the run's last turn when a limit runs out.
func (w *ConfigWrapper) WrapUp(agent string) *ConfigWrapper {
	w.Spec.Limits.WrapUp = &v1alpha1.WrapUp{Agent: agent}
	return w
}

// MaxErrors sets limits.maxErrors.
func (w *ConfigWrapper) MaxErrors(n int32) *ConfigWrapper { w.Spec.Limits.MaxErrors = &n; return w }

// Timeout sets limits.timeout.
func (w *ConfigWrapper) Timeout(d time.Duration) *ConfigWrapper {
	w.Spec.Limits.Timeout = v1alpha1.NewDuration(d)
	return w
}

// AgentTimeout sets limits.agentTimeout.
func (w *ConfigWrapper) AgentTimeout(d time.Duration) *ConfigWrapper {
	w.Spec.Limits.AgentTimeout = v1alpha1.NewDuration(d)
	return w
}

// AgentWrapper builds one agent.
type AgentWrapper struct{ v1alpha1.Agent }

// MakeAgent starts a Scripted agent.
func MakeAgent(name string) *AgentWrapper {
	w := &AgentWrapper{}
	w.Name = name
	w.Model.Provider = v1alpha1.ProviderScripted
	return w
}

// HandsOffTo sets the agents it may hand off to.
func (w *AgentWrapper) HandsOffTo(names ...string) *AgentWrapper { w.Handoffs = names; return w }

// Terminator makes it a terminator.
func (w *AgentWrapper) Terminator() *AgentWrapper { w.Agent.Terminator = true; return w }

// Parallel lets the agent fan out to its handoffs, joining as join says.
func (w *AgentWrapper) Parallel(maxBranches int32, budget v1alpha1.BranchBudget, join v1alpha1.Join) *AgentWrapper {
	w.Agent.Parallel = &v1alpha1.Parallel{MaxBranches: ptr.To(maxBranches), Budget: budget, Join: join}
	return w
}

// MaxSteps caps its steps.
func (w *AgentWrapper) MaxSteps(n int32) *AgentWrapper { w.Agent.MaxSteps = ptr.To(n); return w }

// Timeout sets its step deadline.
func (w *AgentWrapper) Timeout(d time.Duration) *AgentWrapper {
	w.Agent.Timeout = v1alpha1.NewDuration(d)
	return w
}

// Provider sets its model provider.
func (w *AgentWrapper) Provider(p v1alpha1.ModelProvider) *AgentWrapper {
	w.Model.Provider = p
	return w
}

// Script appends turns to its script.
func (w *AgentWrapper) Script(turns ...*TurnWrapper) *AgentWrapper {
	for _, t := range turns {
		w.Agent.Script = append(w.Agent.Script, *t.ScriptTurn.DeepCopy())
	}
	return w
}

// TurnWrapper builds one script turn.
type TurnWrapper struct{ v1alpha1.ScriptTurn }

// Says starts a turn that answers output.
func Says(output string) *TurnWrapper {
	return &TurnWrapper{v1alpha1.ScriptTurn{Output: output}}
}

// HandOff asks to hand off to agent.
func (w *TurnWrapper) HandOff(agent string) *TurnWrapper { w.Handoff = agent; return w }

// FansOut hands off to several agents at once, agent and input in pairs.
func (w *TurnWrapper) FansOut(agentsAndInputs ...string) *TurnWrapper {
	for i := 0; i+1 < len(agentsAndInputs); i += 2 {
		w.ScriptTurn.Parallel = append(w.ScriptTurn.Parallel, v1alpha1.BranchRequest{Agent: agentsAndInputs[i], Input: agentsAndInputs[i+1]})
	}
	return w
}

// Because sets the handoff reason.
func (w *TurnWrapper) Because(reason string) *TurnWrapper { w.Reason = reason; return w }

// Emits emits a signal.
func (w *TurnWrapper) Emits(signal string) *TurnWrapper { w.Signal = signal; return w }

// Tokens sets the reported usage.
func (w *TurnWrapper) Tokens(n int64) *TurnWrapper { w.ScriptTurn.Tokens = n; return w }

// When makes the turn eligible only for inputs that contain s.
func (w *TurnWrapper) When(s string) *TurnWrapper { w.ScriptTurn.When = s; return w }

// Fails makes the turn fail with msg.
func (w *TurnWrapper) Fails(msg string) *TurnWrapper { w.Error = msg; return w }

// Truncated marks the answer as cut at the token limit.
func (w *TurnWrapper) Truncated() *TurnWrapper { w.FinishReason = v1alpha1.FinishLength; return w }

// Delay adds simulated latency.
func (w *TurnWrapper) Delay(d time.Duration) *TurnWrapper {
	w.ScriptTurn.Delay = v1alpha1.NewDuration(d)
	return w
}

// RunWrapper builds an AgentRun.
type RunWrapper struct{ v1alpha1.AgentRun }

// MakeRun starts a run.
func MakeRun(name, namespace string) *RunWrapper {
	w := &RunWrapper{}
	w.APIVersion, w.Kind = v1alpha1.GroupVersion.String(), "AgentRun"
	w.Name, w.Namespace = name, namespace
	return w
}

// Obj returns the run.
func (w *RunWrapper) Obj() *v1alpha1.AgentRun { return w.AgentRun.DeepCopy() }

// Config names its AgentConfig.
func (w *RunWrapper) Config(name string) *RunWrapper { w.Spec.ConfigRef.Name = name; return w }

// Input sets its input.
func (w *RunWrapper) Input(s string) *RunWrapper { w.Spec.Input = s; return w }

// MaxTokens overrides limits.maxTokens.
func (w *RunWrapper) MaxTokens(n int64) *RunWrapper {
	w.overrides().MaxTokens = &n
	return w
}

// MaxHandoffs overrides limits.maxHandoffs.
func (w *RunWrapper) MaxHandoffs(n int32) *RunWrapper {
	w.overrides().MaxHandoffs = &n
	return w
}

// Timeout overrides limits.timeout.
func (w *RunWrapper) Timeout(d time.Duration) *RunWrapper {
	w.overrides().Timeout = v1alpha1.NewDuration(d)
	return w
}

// TTL sets the run's ttlSecondsAfterFinished.
func (w *RunWrapper) TTL(seconds int32) *RunWrapper {
	w.Spec.TTLSecondsAfterFinished = &seconds
	return w
}

// SkipApprovals runs without the config's gates.
func (w *RunWrapper) SkipApprovals() *RunWrapper { w.Spec.Approvals = v1alpha1.ApprovalsSkip; return w }

// Turn makes the run turn n of a session, as the webhook numbers it.
func (w *RunWrapper) Turn(session string, n int) *RunWrapper {
	w.Spec.Session = &v1alpha1.SessionReference{Name: session}
	return w.Annotate(v1alpha1.AnnotationTurn, strconv.Itoa(n))
}

// Annotate sets an annotation.
func (w *RunWrapper) Annotate(key, value string) *RunWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[key] = value
	return w
}

func (w *RunWrapper) overrides() *v1alpha1.LimitOverrides {
	if w.Spec.Limits == nil {
		w.Spec.Limits = &v1alpha1.LimitOverrides{}
	}
	return w.Spec.Limits
}
