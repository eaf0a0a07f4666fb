// Package agents is what a step is: the Agent interface the AgentRun controller asks to take a
// step, with the Request and Result, the messages a model is given, and the checks and the retry
// policy every provider's answers go through. Each provider is a package of its own (scripted,
// openai, httpagent), listed in one table in package providers.
package agents

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/utils/clock"

	"github.com/baton-dev/baton/api/v1alpha1"
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
	Context []ContextEntry
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
	Left Left
	// Tools makes the step's tool calls; nil when the agent has no tools.
	Tools Toolbox
	// ModelCalls, when set, is told of each call of the model the step makes.
	ModelCalls ModelCalls
}

// ModelCalls is told of each call of a model a step makes: before the call, with what the step
// did so far, and, through the function it returns, once the model answered or failed. Traces
// hang here, outside the providers and the core.
type ModelCalls interface {
	Call(ctx context.Context, exchanges []Exchange) (context.Context, func(*Reply, error))
}

// ContextKind says what a context entry is.
type ContextKind string

// Context entry kinds.
const (
	ContextOutput    ContextKind = "Output"
	ContextTruncated ContextKind = "Truncated"
	ContextInvalid   ContextKind = "Invalid"
	ContextFailed    ContextKind = "Failed"
	ContextFeedback  ContextKind = "Feedback"
	ContextReply     ContextKind = "Reply"
)

// ContextEntry is one thing an agent sees from earlier in the run.
type ContextEntry struct {
	// Step is the step it came from, or the step after which a person said it.
	Step int32 `json:"step"`
	// From is the agent that said it, or the person.
	From string `json:"from"`
	// Kind is Output, Truncated (a cut answer), Invalid (an answer that failed its schema, with
	// the errors), Failed, Feedback or Reply.
	Kind ContextKind `json:"kind"`
	// Text is what was said, in full.
	Text string `json:"text,omitempty"`
}

// Repair is an answer that failed its outputSchema, and the validation errors.
type Repair struct {
	Output string `json:"output"`
	Errors string `json:"errors"`
}

// Left is what remains of a run's limits before a step.
type Left struct {
	Steps    int32 `json:"steps"`
	Handoffs int32 `json:"handoffs"`
	Tokens   int64 `json:"tokens"`
	// Seconds is the time left before the run's timeout, if it has started counting.
	Seconds int64 `json:"seconds,omitempty"`
}

// Peer is an agent the stepping agent may hand off to.
type Peer struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Result is what a step produced.
type Result struct {
	// Output is the agent's answer.
	Output string
	// Handoff is the agent it asks to hand control to.
	Handoff string
	// Reason is why it hands off.
	Reason string
	// Signal is a signal it emits.
	Signal string
	// Tokens is the usage the step reports, and CountedTokens the part of it already added to
	// the run's status while the step was held at gates. InputTokens and CountedInputTokens are
	// the parts of them that were prompts (0 when the provider does not say); the rest was
	// output.
	Tokens             int64
	CountedTokens      int64
	InputTokens        int64
	CountedInputTokens int64
	// FinishReason says why the model stopped.
	FinishReason v1alpha1.FinishReason
	// Routing is a supervisor's routing decision.
	Routing *v1alpha1.RoutingDecision
	// Ignored names the further tool calls of a model that called several; the first won.
	Ignored []string
	// ToolCalls is the number of tool calls the step made, and CountedToolCalls those of them
	// already added to the run's status while the step was held at gates.
	ToolCalls        int32
	CountedToolCalls int32
	// Held is set when the step stopped at a tool call that waits for approval.
	Held *Held
	// Trip is set when a guard stopped the run before a tool call.
	Trip *ToolTrip
}

// Agent takes steps. Step must return when ctx is done, and must not change req: the caller
// records it as the request the agent was sent. A step that fails returns why, and with it, if
// it used tokens or made tool calls before it failed, a result that says so (else nil).
//
// Requests and results pass by pointer: a step's goroutine waits on its agent through every
// frame between it and the provider's call, for as long as the agent takes, and a copy of
// either in each frame would make every waiting step's stack a size larger.
type Agent interface {
	Step(ctx context.Context, req *Request) (*Result, error)
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
	retrying.Transport = NewRetryTransport(limitBodies{next: next}, clk)
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
