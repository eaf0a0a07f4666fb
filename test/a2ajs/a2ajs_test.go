package a2ajs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/test/a2ajs"
)

// The stock agent on the A2A JavaScript SDK, asked by Baton's A2A provider: a question without a
// warehouse asks which; the reply, in the same task, is answered.
func TestTheStockAgentAsksAndTheReplyContinuesItsTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stock, err := a2ajs.StartStockAgent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stock.Stop()
	a, err := providers.New(agents.Dependencies{}).For(v1alpha1.ProviderA2A)
	if err != nil {
		t.Fatal(err)
	}
	req := &agents.Request{Namespace: "ns", Run: "ord-7", RunUID: "uid-7", Step: 2, Input: "How many SKU-123 are in stock?",
		Agent: v1alpha1.Agent{Name: "stock", Model: v1alpha1.ModelSpec{Provider: v1alpha1.ProviderA2A, Endpoint: stock.URL}}}
	asked, err := a.Step(ctx, req)
	if err != nil {
		t.Fatalf("%v\n%s", err, stock.LogTail(4096))
	}
	if !asked.InputRequired || asked.Output != "Which warehouse: berlin or lyon?" || asked.RemoteTask == "" {
		t.Fatalf("asked %+v", asked)
	}
	reply := *req
	reply.Step, reply.Input, reply.RemoteTask = 3, "berlin", asked.RemoteTask
	answered, err := a.Step(ctx, &reply)
	if err != nil {
		t.Fatalf("%v\n%s", err, stock.LogTail(4096))
	}
	if answered.InputRequired || answered.Output != "SKU-123: 42 units in berlin." {
		t.Fatalf("answered %+v\n%s", answered, stock.LogTail(4096))
	}
}

// An agent that starts a reply's stream with the task as it was, still asking (as the SDK's own
// examples do), is followed to the reply's answer.
func TestAReplyIsFollowedPastTheTaskAsItWas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "asks-again-agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := a2ajs.StartAgent(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Stop()
	a, err := providers.New(agents.Dependencies{}).For(v1alpha1.ProviderA2A)
	if err != nil {
		t.Fatal(err)
	}
	req := &agents.Request{Namespace: "ns", Run: "r", RunUID: "uid-8", Step: 1, Input: "find the logs",
		Agent: v1alpha1.Agent{Name: "logs", Model: v1alpha1.ModelSpec{Provider: v1alpha1.ProviderA2A, Endpoint: agent.URL}}}
	asked, err := a.Step(ctx, req)
	if err != nil || !asked.InputRequired || asked.Output != "Which region?" {
		t.Fatalf("asked %+v, %v\n%s", asked, err, agent.LogTail(4096))
	}
	reply := *req
	reply.Step, reply.Input, reply.RemoteTask = 2, "eu-west", asked.RemoteTask
	answered, err := a.Step(ctx, &reply)
	if err != nil || answered.InputRequired || answered.Output != "logs of eu-west" {
		t.Fatalf("answered %+v, %v\n%s", answered, err, agent.LogTail(4096))
	}
}
