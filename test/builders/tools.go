package builders

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// MCPServer adds an MCP tool server.
func (w *ConfigWrapper) MCPServer(name, url string) *ConfigWrapper {
	w.Spec.ToolServers = append(w.Spec.ToolServers, v1alpha1.ToolServer{Name: name, MCP: &v1alpha1.MCPServer{URL: url}})
	return w
}

// HTTPTool adds an HTTP tool server whose one tool is named like it.
func (w *ConfigWrapper) HTTPTool(name, url string) *ConfigWrapper {
	w.Spec.ToolServers = append(w.Spec.ToolServers, v1alpha1.ToolServer{Name: name, HTTP: &v1alpha1.HTTPTool{URL: url}})
	return w
}

// MaxToolCalls sets limits.maxToolCalls.
func (w *ConfigWrapper) MaxToolCalls(n int32) *ConfigWrapper {
	w.Spec.Limits.MaxToolCalls = &n
	return w
}

// MaxRepeatedToolCalls sets loopDetection.maxRepeatedToolCalls.
func (w *ConfigWrapper) MaxRepeatedToolCalls(n int32) *ConfigWrapper {
	w.Spec.LoopDetection.MaxRepeatedToolCalls = &n
	return w
}

// ToolsWrapper builds an agent's tools entry.
type ToolsWrapper struct{ v1alpha1.AgentTools }

// Uses starts an agent's tools entry for a server.
func Uses(server string) *ToolsWrapper {
	return &ToolsWrapper{v1alpha1.AgentTools{Server: server}}
}

// Allow lets the agent call only these tools of the server.
func (w *ToolsWrapper) Allow(tools ...string) *ToolsWrapper { w.AgentTools.Allow = tools; return w }

// Approved makes every call wait for required approvals.
func (w *ToolsWrapper) Approved(required int32) *ToolsWrapper {
	w.Approval = v1alpha1.ToolApprovalRequired
	w.Gate = &v1alpha1.ToolGate{Required: required}
	return w
}

// SideEffects marks the tools as changing the world.
func (w *ToolsWrapper) SideEffects() *ToolsWrapper { w.AgentTools.SideEffects = true; return w }

// Tools gives the agent tools.
func (w *AgentWrapper) Tools(tools ...*ToolsWrapper) *AgentWrapper {
	for _, t := range tools {
		w.Agent.Tools = append(w.Agent.Tools, *t.AgentTools.DeepCopy())
	}
	return w
}

// MaxToolCalls sets the agent's tool calls per step.
func (w *AgentWrapper) MaxToolCalls(n int32) *AgentWrapper {
	w.Agent.MaxToolCalls = ptr.To(n)
	return w
}

// Calls makes the turn call a tool first, with JSON arguments.
func (w *TurnWrapper) Calls(server, tool, arguments string) *TurnWrapper {
	c := v1alpha1.ScriptToolCall{Server: server, Tool: tool}
	if arguments != "" {
		c.Arguments = &apiextensionsv1.JSON{Raw: []byte(arguments)}
	}
	w.ToolCalls = append(w.ToolCalls, c)
	return w
}
