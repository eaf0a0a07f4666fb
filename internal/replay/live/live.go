// Package live answers the turns a replay's recording does not hold by calling the agent's
// provider, as the operator would have: the same request, the context window the config allows,
// the model endpoint and its prices. It is the one place a replay leaves the process, behind
// the egress policy, with the user's own credentials (Secrets), and it calls no tool: a tool
// call is answered from the recording or stops the replay (Tools).
package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/shopspring/decimal"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/workflow"
)

// Resolver resolves an agent's model endpoint reference for the run's namespace.
type Resolver interface {
	Resolve(ctx context.Context, namespace string, ref *v1alpha1.EndpointReference) (*endpoints.Endpoint, error)
}

// Caller answers a replay's turns live, for one recorded run replayed on one plan.
type Caller struct {
	// Providers call the models; their HTTP client goes through the egress policy.
	Providers *agents.Providers
	// Endpoints resolves model endpoint references; nil when none can be read.
	Endpoints Resolver
	// Plan is the plan the replay runs on, Run the recorded run, Task its input.
	Plan *workflow.Plan
	Run  agents.RunRef
	Task string
	// Results are the recorded run's tool results, which a live turn's tool calls are answered
	// from.
	Results []replay.ToolResult

	// refused notes what the egress policy refused, when NewCaller made the caller.
	refused *refusals
}

// Setup is what a live replay reaches outside the process with.
type Setup struct {
	// HTTPClient calls the models: the egress policy's.
	HTTPClient *http.Client
	// Reader reads Secrets, model endpoints and namespaces as the user; nil when no cluster is
	// at hand.
	Reader client.Reader
	// OperatorNamespace holds the Secrets of ClusterModelEndpoints.
	OperatorNamespace string
}

// NewCaller is the caller of the live turns of rec's replay on plan p, for the run of namespace
// and uid.
func NewCaller(s Setup, p *workflow.Plan, rec replay.Recording, namespace, uid string) *Caller {
	refused := &refusals{}
	httpClient := refused.wrap(s.HTTPClient)
	c := &Caller{
		refused:   refused,
		Providers: providers.New(agents.Dependencies{HTTPClient: httpClient, Secrets: Secrets{Reader: s.Reader}}),
		Plan:      p,
		Run:       agents.RunRef{Namespace: namespace, Name: rec.Run, UID: uid},
		Task:      rec.Input,
		Results:   rec.ToolResults,
	}
	if s.Reader != nil {
		c.Endpoints = &endpoints.Resolver{Reader: s.Reader, OperatorNamespace: s.OperatorNamespace}
	}
	return c
}

// Stop is a live turn that could not be taken for a reason outside the replayed config: the
// replay stops there, saying why, rather than count a failed step.
type Stop struct{ Err error }

func (s *Stop) Error() string { return s.Err.Error() }
func (s *Stop) Unwrap() error { return s.Err }

// Live is the replay's Live, under ctx.
func (c *Caller) Live(ctx context.Context) replay.Live {
	return func(t replay.LiveTurn) (workflow.StepResult, error) { return c.turn(ctx, t) }
}

// turn takes one step live. A failure of the model's call is a failed step, as on the cluster;
// what stops the replay (no key, an endpoint that cannot be had, a refused address, a tool call
// nothing recorded) is an error.
func (c *Caller) turn(ctx context.Context, t replay.LiveTurn) (workflow.StepResult, error) {
	req, price, err := c.request(ctx, t)
	if err != nil {
		return workflow.StepResult{}, err
	}
	agent, err := c.Providers.For(req.Agent.Model.Provider)
	if err != nil {
		return workflow.StepResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Plan.StepTimeout(t.Step.Agent))
	defer cancel()
	c.refused.reset()
	var box *Tools
	if req.Tools != nil {
		box = req.Tools.(*Tools)
	}
	meter := &meter{price: price}
	if price != nil {
		req.ModelCalls = meter
	}
	answer, err := agent.Step(ctx, req)
	res := workflow.StepResult{Agent: t.Step.Agent, Input: t.Step.Input}
	if answer != nil {
		res.Result = *answer
	}
	var stop *Stop
	switch {
	case box != nil && box.stopped != nil:
		return workflow.StepResult{}, box.stopped
	case c.refused.err() != nil:
		return workflow.StepResult{}, c.refused.err()
	case errors.As(err, &stop) || egress.IsRefused(err):
		return workflow.StepResult{}, err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Error, res.TimedOut = fmt.Sprintf("timed out after %s", c.Plan.StepTimeout(t.Step.Agent)), true
	case err != nil:
		res.Error = err.Error()
	}
	if t.Step.Continues && res.Error == "" {
		res.Output = t.Previous + res.Output
	}
	if price != nil {
		res.Cost, res.Currency = meter.total(), price.currency
	}
	return res, nil
}

// request is what the step's agent is asked, as the operator would ask it, and the prices of
// its model endpoint (nil when it has none).
func (c *Caller) request(ctx context.Context, t replay.LiveTurn) (*agents.Request, *priced, error) {
	req := agents.NewRequest(c.Plan, c.Run, c.Task, t.Step)
	if deadline, ok := workflow.Deadline(c.Plan, t.From); ok {
		req.Left.Seconds = int64(deadline.Sub(t.Now).Seconds())
	}
	scripted := req.Agent.Model.Provider == "" || req.Agent.Model.Provider == v1alpha1.ProviderScripted
	if maxMessages, maxChars := c.Plan.ContextBudget(); maxMessages > 0 && !scripted {
		req.Context = workflow.Window(slices.Clone(t.Context), maxMessages, maxChars)
	}
	switch {
	case t.Step.Continues:
		req.Continuation = t.Previous
	case t.Step.Repairs:
		req.Repair = &agents.Repair{Output: t.Previous, Errors: t.Errors}
	}
	if len(req.Agent.Tools) > 0 && t.Step.WrapUp == nil {
		uses := t.Uses
		if uses == nil {
			uses = &workflow.ToolUses{}
		}
		req.Tools = &Tools{plan: c.Plan, agent: t.Step.Agent, step: t.Step.Number, results: c.Results, runMade: t.From.ToolCalls, uses: uses}
	}
	ref := req.Agent.Model.EndpointRef
	if ref == nil {
		return req, nil, nil
	}
	if c.Endpoints == nil {
		return nil, nil, fmt.Errorf("agent %s names model endpoint %s, and no cluster is at hand to read it", t.Step.Agent, ref.Name)
	}
	e, err := c.Endpoints.Resolve(ctx, c.Run.Namespace, ref)
	if err != nil {
		return nil, nil, fmt.Errorf("agent %s's model endpoint: %w", t.Step.Agent, err)
	}
	m := &req.Agent.Model
	m.Provider, m.Endpoint, m.APIKeySecretRef, m.EndpointRef = e.Provider, e.URL, e.Secret, nil
	req.SecretNamespace = e.SecretNamespace
	price, ok := e.Prices.For(m.Name)
	if !ok {
		return req, nil, nil
	}
	return req, &priced{Price: price, currency: e.Prices.Currency()}, nil
}

// priced is a model's price on its endpoint.
type priced struct {
	cost.Price
	currency string
}

// meter adds up what a live step's model calls cost.
type meter struct {
	price *priced
	mu    sync.Mutex
	sum   decimal.Decimal
}

// Call counts each call's usage once it answered.
func (m *meter) Call(ctx context.Context, _ []agents.Exchange) (context.Context, func(*agents.Reply, error), error) {
	return ctx, func(r *agents.Reply, _ error) {
		if r == nil {
			return
		}
		m.mu.Lock()
		m.sum = m.sum.Add(m.price.Of(cost.Reported(r.Tokens, r.InputTokens, r.CachedInputTokens)))
		m.mu.Unlock()
	}, nil
}

func (m *meter) total() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cost.Format(m.sum)
}

// refusals notes the egress policy's refusals, where their errors are whole: a provider
// reports a call that failed in words, and a refused call stops the replay rather than fail
// its step.
type refusals struct {
	next http.RoundTripper
	mu   sync.Mutex
	last error
}

// wrap is c with its transport noting refusals.
func (r *refusals) wrap(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	r.next = c.Transport
	if r.next == nil {
		r.next = http.DefaultTransport
	}
	wrapped := *c
	wrapped.Transport = r
	return &wrapped
}

func (r *refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	var refused *egress.Refused
	if errors.As(err, &refused) {
		r.mu.Lock()
		r.last = refused
		r.mu.Unlock()
	}
	return resp, err
}

func (r *refusals) reset() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.last = nil
	r.mu.Unlock()
}

func (r *refusals) err() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
