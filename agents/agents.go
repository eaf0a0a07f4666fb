// Package agents is what a step is: the Agent interface the AgentRun controller asks to take a
// step, with the Request (what it answers, workflow.Result, is the core's), the messages a model is given, and the checks and the retry
// policy every provider's answers go through. Each provider is a package of its own (scripted,
// openai, httpagent), listed in one table in package providers.
package agents

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/utils/clock"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Request is one step for one agent.
type Request struct {
	// Namespace and Run name the AgentRun the step belongs to.
	Namespace string
	Run       string
	// RunUID tells apart runs that reuse a name.
	RunUID string
	// Step is the step's number in the run, from 1.
	Step int32
	// Turn is how many steps this agent took before in this run.
	Turn int32
	// Attempt counts the retries of this answer: after a truncated answer or a failed schema.
	Attempt int
	// Agent is the agent's pinned spec.
	Agent v1alpha1.Agent
	// Task is the run's input, the job the team works on.
	Task string
	// Input is what the agent is given for this step.
	Input string
	// Reason is why the agent has control.
	Reason string
	// Context is the window of earlier outputs, feedback and replies, oldest first.
	Context []workflow.ContextEntry
	// Continuation is the agent's own truncated answer, to continue from.
	Continuation string
	// Repair asks the agent to fix an answer that failed its outputSchema.
	Repair *Repair
	// Signals are the config's declared signals.
	Signals []v1alpha1.Signal
	// Peers describe the agents this one may hand off to.
	Peers []Peer
	// Children, for a supervisor, are the agents its routing decision may name.
	Children []Peer
	// Left is what remains of the run's limits.
	Left workflow.Left
	// Tools makes the step's tool calls; nil when the agent has no tools.
	Tools Toolbox
	// ModelCalls, when set, is told of each call of the model the step makes.
	ModelCalls ModelCalls
	// WrapUp, when set, says in a few words which limit ran out (workflow.LimitRanOut): the step
	// is the run's last turn, with no
	// handoffs, routing, signals or tools, and its answer ends the run.
	WrapUp string
	// SecretNamespace, when set, is where the Secret of Agent.Model.APIKeySecretRef is: the
	// operator's namespace, for a ClusterModelEndpoint's key. Unset, it is the run's.
	SecretNamespace string
	// RemoteTask is the task a remote agent kept open when it asked for input in the step
	// before (workflow.Result.RemoteTask): the step's input is the reply that continues it.
	RemoteTask string
	// Updates, when set, is told what a remote agent reports while it works on the step.
	Updates Updates
}

// Updates keeps what a remote agent reports while it works on a step (an A2A agent's status
// updates), in the run's transcript. It bounds how much of it is kept.
type Updates interface {
	Report(ctx context.Context, state, text string)
}

// KeyNamespace is the namespace of the Secret that holds the agent's API key.
func (r *Request) KeyNamespace() string {
	if r.SecretNamespace != "" {
		return r.SecretNamespace
	}
	return r.Namespace
}

// MaxBranches is the most branches the step's answer may fan out to: the agent's
// parallel.maxBranches (default 4), or 0 when the step may not fan out (the agent has no
// parallel or nothing to hand off to, or the step is a wrap-up turn). The request does not say
// how deeply the run is nested, nor how many of limits.maxBranches remain: the core refuses a
// fan-out past them as a failed step that says which.
func (r *Request) MaxBranches() int32 {
	p := r.Agent.Parallel
	if p == nil || r.WrapUp != "" || len(r.Peers) == 0 {
		return 0
	}
	if p.MaxBranches == nil {
		return workflow.DefaultMaxBranchesPerFanOut
	}
	return min(max(*p.MaxBranches, 1), v1alpha1.MaxBranchesPerFanOut)
}

// ModelCalls is told of each call of a model a step makes: before the call, with what the step
// did so far, and, through the function it returns, once the model answered or failed. Traces,
// pacing and prices hang here, outside the providers and the core. A call it refuses (with a
// *workflow.ToolTrip: the run's cost budget cannot pay for it) is not made.
type ModelCalls interface {
	Call(ctx context.Context, exchanges []Exchange) (context.Context, func(*Reply, error), error)
}

// Repair is an answer that failed its outputSchema, and the validation errors.
type Repair struct {
	Output string `json:"output"`
	Errors string `json:"errors"`
}

// Peer is an agent the stepping agent may hand off to.
type Peer struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Agent takes steps. Step must return when ctx is done, and must not change req: the caller
// records it as the request the agent was sent. A step that fails returns why, and with it, if
// it used tokens or made tool calls before it failed, a result that says so (else nil).
//
// Requests and results pass by pointer: a step's goroutine waits on its agent through every
// frame between it and the provider's call, for as long as the agent takes, and a copy of
// either in each frame would make every waiting step's stack a size larger.
type Agent interface {
	Step(ctx context.Context, req *Request) (*workflow.Result, error)
}

// Dependencies are what providers may use.
type Dependencies struct {
	// Clock measures simulated latency and retry waits.
	Clock clock.Clock
	// HTTPClient calls model servers and HTTP agents. Its transport is wrapped to retry
	// transient failures (see RetryTransport).
	HTTPClient *http.Client
	// Secrets reads API keys.
	Secrets SecretReader
}

// SecretReader reads one key of a Secret in a namespace.
type SecretReader interface {
	SecretKey(ctx context.Context, namespace, name, key string) (string, error)
}

// Factory builds a provider's Agent.
type Factory func(Dependencies) Agent

// Providers hands out the Agent of each provider.
type Providers struct {
	agents map[v1alpha1.ModelProvider]Agent
}

// NewProviders builds the providers of a table (package providers holds this build's), each
// behind the checks every answer passes, and their HTTP calls behind the retry policy.
func NewProviders(deps Dependencies, factories map[v1alpha1.ModelProvider]Factory) *Providers {
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = &http.Client{}
	}
	deps.HTTPClient = RetryingClient(deps.HTTPClient, deps.Clock)
	p := &Providers{agents: make(map[v1alpha1.ModelProvider]Agent, len(factories))}
	for name, f := range factories {
		p.agents[name] = &checked{next: f(deps), secrets: deps.Secrets}
	}
	return p
}

// RetryingClient is the client model servers, HTTP agents and tools are called with: its
// transport retries transient failures (see RetryTransport) and bounds what it reads of
// answers.
func RetryingClient(c *http.Client, clk clock.Clock) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	retrying := *c
	retrying.Transport = NewRetryTransport(observeAnswers{next: limitBodies{next: next}}, clk)
	return &retrying
}

// For returns the Agent that runs steps for the provider.
func (p *Providers) For(provider v1alpha1.ModelProvider) (Agent, error) {
	if provider == "" {
		provider = v1alpha1.ProviderScripted
	}
	a, ok := p.agents[provider]
	if !ok {
		return nil, fmt.Errorf("model provider %s is not available in this operator build", provider)
	}
	return a, nil
}
