package a2aserver

import (
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Paths of a team's A2A agent, under its base (/namespaces/{namespace}/agentconfigs/{name}).
const (
	cardPath = "/.well-known/agent-card.json"
	v1Path   = "/a2a"
	v03Path  = "/a2a/v0.3"
)

// bearer names the card's one security scheme.
const bearer = a2a.SecuritySchemeName("kubernetes")

// CardOf is the AgentCard of a team served at base: the config's name, its description (or
// its entrypoint agent's), each agent as a skill, and the JSON-RPC interfaces of A2A 1.0 and
// 0.3. Callers authenticate as to the API server, with a token made for audience.
func CardOf(cfg *v1alpha1.AgentConfig, base, audience string) *a2a.AgentCard {
	spec := &cfg.Spec
	desc := ""
	if spec.A2A != nil {
		desc = spec.A2A.Description
	}
	for _, a := range spec.Agents {
		if desc == "" && a.Name == spec.Entrypoint {
			desc = a.Description
		}
	}
	if desc == "" {
		desc = fmt.Sprintf("The Baton team %s of namespace %s", cfg.Name, cfg.Namespace)
	}
	card := &a2a.AgentCard{
		Name:        cfg.Name,
		Description: desc,
		Version:     fmt.Sprintf("generation-%d", cfg.Generation),
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base+v1Path, a2a.TransportProtocolJSONRPC),
			{URL: base + v03Path, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain"},
		SecuritySchemes: a2a.NamedSecuritySchemes{bearer: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: fmt.Sprintf("a Kubernetes bearer token made for audience %s (kubectl create token SERVICEACCOUNT --audience %s), or a client certificate; "+
				"the caller needs get on the AgentConfig, and create on agentruns in the namespace to start a task", audience, audience)}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{bearer: {}}},
	}
	for _, a := range spec.Agents {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: a.Name, Name: a.Name, Description: a.Description,
			Tags: []string{"baton", string(spec.Mode)}})
	}
	return card
}
