// Package providers lists the model providers this build knows. A new provider is a package of
// its own and one line here.
package providers

import (
	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/a2aagent"
	"github.com/baton-dev/baton/agents/httpagent"
	"github.com/baton-dev/baton/agents/openai"
	"github.com/baton-dev/baton/agents/scripted"
	"github.com/baton-dev/baton/api/v1alpha1"
)

// table is every provider this build knows.
var table = map[v1alpha1.ModelProvider]agents.Factory{
	v1alpha1.ProviderScripted: scripted.New,
	v1alpha1.ProviderOpenAI:   openai.New,
	v1alpha1.ProviderHTTP:     httpagent.New,
	v1alpha1.ProviderA2A:      a2aagent.New,
}

// New builds every provider this build knows.
func New(deps agents.Dependencies) *agents.Providers {
	return agents.NewProviders(deps, table)
}
