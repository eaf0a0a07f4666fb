package agentrun

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/egress"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// keys reads API keys from a map, as the operator reads them from Secrets.
type keys map[string]string

func (k keys) SecretKey(_ context.Context, _, name, key string) (string, error) {
	return k[name+"/"+key], nil
}

// One step of an agent on an OpenAI-compatible model server, from the reconcile to the model
// and back to status: the run ends with the model's answer, and counts the tokens the server
// billed.
func TestOneModelStep(t *testing.T) {
	server := fakes.NewOpenAI()
	t.Cleanup(server.Close)
	server.Reply(fakes.Reply{Content: "the answer is 42", Tokens: 120})
	agent := MakeAgent("solver").Provider(v1alpha1.ProviderOpenAI).Terminator()
	agent.Model.Name, agent.Model.Endpoint = "gpt-4o-mini", server.BaseURL()
	agent.Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}
	agent.Model.MaxOutputTokens = ptr.To[int32](200)
	cfg := MakeConfig("solo", ns).Agents(agent).Obj()
	run := MakeRun("r", ns).Config("solo").Input("what is six times seven?").Obj()
	run.UID = types.UID("uid-r")
	// The operator's egress policy, with the loopback model server allowed as the tests allow
	// their fakes.
	policy, err := egress.New([]string{"127.0.0.1/32"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := newOperatorOn(t, agents.Dependencies{Clock: clock.RealClock{}, HTTPClient: policy.Client(), Secrets: keys{"llm/apiKey": "sk-test"}}, cfg, run)
	got := o.drive(t, "r", ended).Status
	if got.TerminationReason != v1alpha1.ReasonCompleted || got.Output != "the answer is 42" {
		t.Fatalf("ended %s with %q (%s); want Completed with the model's answer", got.TerminationReason, got.Output, got.TerminationMessage)
	}
	if s := server.Stats(); got.TokensUsed != 120 || s.OK != 1 {
		t.Errorf("%d tokens counted over %d answers; want the one answer's usage", got.TokensUsed, s.OK)
	}
}
