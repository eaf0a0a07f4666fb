package providers_test

import (
	"testing"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestProvidersRefuseUnknownProviders(t *testing.T) {
	p := providers.New(agents.Dependencies{})
	if _, err := p.For(v1alpha1.ProviderScripted); err != nil {
		t.Fatal(err)
	}
	if _, err := p.For(""); err != nil {
		t.Fatalf("an unset provider is Scripted: %v", err)
	}
	if _, err := p.For("Telepathy"); err == nil {
		t.Fatal("an unknown provider was accepted")
	}
}
