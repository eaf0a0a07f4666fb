// Package a2aagent is the A2A provider: a step is one message to an agent that speaks the
// Agent2Agent protocol (A2A), sent with the protocol's own Go SDK, in A2A 1.0 or, for an agent
// whose card offers only that, 0.3. The agent's card is read from its well-known path and kept
// a few minutes. A run is one A2A context, so an agent keeps its conversation across the run's
// steps; the step's idempotency key is the message's ID; a task that asks for input makes the
// run wait for a person's reply, which continues the same task (docs/a2a.md).
package a2aagent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/httpagent"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/workflow"
)

// a2aAgent runs steps as A2A messages.
type a2aAgent struct {
	deps  agents.Dependencies
	cards *cards
}

// New is the A2A provider.
func New(deps agents.Dependencies) agents.Agent {
	return &a2aAgent{deps: deps, cards: newCards(deps.Clock)}
}

// pollEvery is how often a task that a blocking send left working is read again.
const pollEvery = time.Second

func (a *a2aAgent) Step(ctx context.Context, req *agents.Request) (*workflow.Result, error) {
	httpClient, err := a.client(ctx, req)
	if err != nil {
		return nil, err
	}
	card, err := a.cards.get(ctx, httpClient, req.Agent.Model.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("reading the A2A agent's card from %s: %w", req.Agent.Model.Endpoint, err)
	}
	// Every transport the card may name is given the step's client: the SDK's defaults would
	// call with a client of their own, around the egress policy.
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithDefaultsDisabled(),
		a2aclient.WithJSONRPCTransport(httpClient),
		a2aclient.WithRESTTransport(httpClient),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: httpClient}),
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: httpClient}),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		return nil, fmt.Errorf("the A2A agent at %s: %w", req.Agent.Model.Endpoint, err)
	}
	defer func() { _ = client.Destroy() }()

	send := &a2a.SendMessageRequest{Message: message(req)}
	var final finalState
	if card.Capabilities.Streaming {
		final, err = stream(ctx, client, send, req.Updates, a.deps)
	} else {
		final, err = sendAndWait(ctx, client, send, a.deps)
	}
	if err != nil {
		return nil, err
	}
	return answer(req, final)
}

// client is the HTTP client of the step's calls: the operator's, through the egress policy,
// with the agent's key as a bearer token when it has one, sent only to the origin of the
// agent's endpoint: a card may name other addresses, and they are not given the key.
func (a *a2aAgent) client(ctx context.Context, req *agents.Request) (*http.Client, error) {
	ref := req.Agent.Model.APIKeySecretRef
	if ref == nil {
		return a.deps.HTTPClient, nil
	}
	if a.deps.Secrets == nil {
		return nil, errors.New("no Secret reader is configured")
	}
	key, err := a.deps.Secrets.SecretKey(ctx, req.KeyNamespace(), ref.Name, ref.Key)
	if err != nil {
		return nil, err
	}
	c := *a.deps.HTTPClient
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	endpoint, err := url.Parse(req.Agent.Model.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("model.endpoint %q: %w", req.Agent.Model.Endpoint, err)
	}
	c.Transport = bearer{next: next, token: key, origin: egress.Origin(endpoint)}
	return &c, nil
}

// bearer sends a token with every request to one origin.
type bearer struct {
	next   http.RoundTripper
	token  string
	origin string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if egress.Origin(r.URL) != b.origin {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// MessageID is the ID of a step's message: its idempotency key, the same for every send of
// the step, an operator restart included.
func MessageID(runUID string, step int32) string {
	return "baton-" + httpagent.IdempotencyKey(runUID, step)
}

// ContextID is the A2A context of a run: every message of the run is in it.
func ContextID(runUID string) string { return "baton-" + runUID }

// finalState is where a step's task ended, or the message the agent answered with.
type finalState struct {
	task    *a2a.Task
	message *a2a.Message
}

// sendAndWait sends the message and, when the agent answers with a task still at work, reads
// the task until it ends or asks for input.
func sendAndWait(ctx context.Context, client *a2aclient.Client, send *a2a.SendMessageRequest, deps agents.Dependencies) (finalState, error) {
	res, err := client.SendMessage(ctx, send)
	if err != nil {
		return finalState{}, fmt.Errorf("sending the step's message: %w", err)
	}
	switch r := res.(type) {
	case *a2a.Message:
		return finalState{message: r}, nil
	case *a2a.Task:
		return waitFor(ctx, client, r, deps)
	}
	return finalState{}, fmt.Errorf("the A2A agent answered with %T", res)
}

// waitFor reads a task until it ends or stops for input, as long as the step may take.
func waitFor(ctx context.Context, client *a2aclient.Client, task *a2a.Task, deps agents.Dependencies) (finalState, error) {
	for !settled(task.Status.State) {
		select {
		case <-ctx.Done():
			return finalState{}, ctx.Err()
		case <-deps.Clock.After(pollEvery):
		}
		t, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			return finalState{}, fmt.Errorf("reading task %s: %w", task.ID, err)
		}
		task = t
	}
	return finalState{task: task}, nil
}

// settled reports whether a task's state ends the step: the task ended, or it waits for
// the caller.
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}
