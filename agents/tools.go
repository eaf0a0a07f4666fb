package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"sync"

	"github.com/baton-dev/baton/internal/workflow"
)

// Tools inside a step. A step is one agent's turn, and a turn can use tools: the model asks for
// calls, the operator makes them and gives the results back, until the model answers. The
// provider speaks to its model; Converse runs the loop around it, the same for every provider;
// a Toolbox (the controller's) makes the calls, records them in the transcript, holds them at
// approval gates and checks the run's limits before each one.

// OfferedTool is a tool as a model is offered it.
type OfferedTool struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Name is the function name the model calls it by (see FunctionName).
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Turn is one answer of the model that asked for tool calls.
type Turn struct {
	// Number counts the step's turns, from 1; the Toolbox numbers turns.
	Number int32 `json:"number"`
	// Text is what the model said with the calls.
	Text  string              `json:"text,omitempty"`
	Calls []workflow.ToolCall `json:"calls"`
	// Tokens is the usage the model reported for the turn, InputTokens the part of it that was
	// the prompt.
	Tokens      int64 `json:"tokens,omitempty"`
	InputTokens int64 `json:"inputTokens,omitempty"`
	// Cost is what the turn's model call cost, when its model is priced (ModelCalls prices it).
	Cost string `json:"cost,omitempty"`
}

// Exchange is a turn and the outcomes of its calls so far, in the calls' order.
type Exchange struct {
	Turn     Turn
	Outcomes []workflow.ToolOutcome
}

// Progress is what a step did before this execution of it: a step held at a tool's gate, or
// cut short by a restart, goes on from its transcript rather than from the start.
type Progress struct {
	Exchanges []Exchange
	// CountedTokens (of which CountedInputTokens were the prompt) and CountedCalls are the
	// tokens and calls already added to the run's status, when the step was held at gates.
	CountedTokens      int64
	CountedInputTokens int64
	CountedCalls       int32
	// CountedCost is what the step's model calls cost until it was last held, already added
	// to the run's status: what its calls cost now is added to it.
	CountedCost string
	// Cost is what the turns in Exchanges cost, from their records.
	Cost string
}

// Toolbox makes a step's tool calls. The AgentRun controller gives one to each step of an agent
// with tools.
type Toolbox interface {
	// Offered is the tools the model may call.
	Offered(ctx context.Context) ([]OfferedTool, error)
	// Progress is what the step already did.
	Progress() Progress
	// Asked numbers and records a turn before any of its calls is made.
	Asked(ctx context.Context, turn *Turn) error
	// Prepare checks one call, in the order of the turn, and readies it: Send makes a call
	// that is to be sent (the calls of one turn are sent together), else Outcome is the call's
	// outcome without sending it (refused, rejected, past a limit). The error is a *workflow.Held (the
	// call waits at its gate), a *workflow.ToolTrip (a limit or the loop detector stops the run) or a
	// failure of the step itself; a tool that fails is an outcome with IsError, not an error.
	Prepare(ctx context.Context, call workflow.ToolCall) (Prepared, error)
}

// Prepared is a call checked and ready: Send sends it and records its outcome, or, when Send
// is nil, Outcome is its outcome.
type Prepared struct {
	Outcome workflow.ToolOutcome
	Send    func(ctx context.Context) (workflow.ToolOutcome, error)
}

// Reply is one answer of the model: calls it asks for, or the step's answer.
type Reply struct {
	Text  string
	Calls []workflow.ToolCall
	// Tokens is the usage the model reported, InputTokens the part of it that was the prompt
	// (0 when the provider does not say), CachedInputTokens the part of the prompt the server
	// had cached (priced lower).
	Tokens            int64
	InputTokens       int64
	CachedInputTokens int64
	// Final is the step's answer, when the reply asks for no calls.
	Final workflow.Result
	// Cost is what the call cost, as ModelCalls priced it once the model answered.
	Cost string
}

// Ask asks the model once: the step's messages, then the exchanges so far. offered is nil when
// the model must answer without tools. The reply is returned by pointer (nil with an error, but
// for an answer the provider cannot use, whose usage still counts): a step's goroutine waits for
// it in this call, and a value would take room on its stack in every frame between the wait and
// the step.
type Ask func(ctx context.Context, exchanges []Exchange, offered []OfferedTool) (*Reply, error)

// DefaultMaxToolCalls is an agent's tool calls per step when its spec says nothing.
const DefaultMaxToolCalls = workflow.DefaultAgentToolCalls

// Converse runs a step's tool loop: it asks the model, makes the calls it asks for, and asks
// again with the results, until the model answers. After the agent's maxToolCalls, the model
// is asked once more without tools, for its answer. A step without a Toolbox asks once.
func Converse(ctx context.Context, req *Request, ask Ask) (*workflow.Result, error) {
	if req.Tools == nil {
		return askOnce(ctx, req.ModelCalls, ask)
	}
	if req.ModelCalls != nil {
		ask = observed(ask, req.ModelCalls)
	}
	return converseTools(ctx, req, ask)
}

// askOnce asks the model of a step without tools once, telling calls: its answer is the
// step's. A step's goroutine waits here for the model, so this frame and those above it hold
// little.
func askOnce(ctx context.Context, calls ModelCalls, ask Ask) (*workflow.Result, error) {
	var done func(*Reply, error)
	if calls != nil {
		var err error
		if ctx, done, err = calls.Call(ctx, nil); err != nil {
			return stopped(err)
		}
	}
	reply, err := ask(ctx, nil, nil)
	if reply == nil {
		reply = &Reply{}
	}
	if done != nil {
		done(reply, err)
	}
	return reply.answer(), err
}

// Metered is a step of a provider that makes one call of its own for the whole step (an HTTP or
// A2A agent), told to calls as one model call: a call refused before it is made is the step's
// result as Converse's would be, and the step's reported usage is the call's.
func Metered(ctx context.Context, calls ModelCalls, step func(context.Context) (*workflow.Result, error)) (*workflow.Result, error) {
	if calls == nil {
		return step(ctx)
	}
	ctx, done, err := calls.Call(ctx, nil)
	if err != nil {
		return stopped(err)
	}
	res, err := step(ctx)
	reply := &Reply{}
	if res != nil {
		reply.Tokens, reply.InputTokens = max(res.Tokens, 0), min(max(res.InputTokens, 0), max(res.Tokens, 0))
	}
	done(reply, err)
	return res, err
}

// stopped is the end of a step that something stopped before its answer: a call held at its
// gate, or a guard's trip before a tool or model call, is the step's result; anything else
// fails the step.
func stopped(err error) (*workflow.Result, error) {
	var held *workflow.Held
	var trip *workflow.ToolTrip
	var quota *workflow.QuotaHold
	switch {
	case errors.As(err, &held):
		return &workflow.Result{Held: held}, nil
	case errors.As(err, &trip):
		return &workflow.Result{Trip: trip}, nil
	case errors.As(err, &quota):
		return &workflow.Result{QuotaHold: quota}, nil
	}
	return &workflow.Result{}, err
}

// answer is the step's answer in a reply that asks for no calls, with the reply's usage.
func (r *Reply) answer() *workflow.Result {
	r.Final.Tokens, r.Final.InputTokens = r.Tokens, r.InputTokens
	return &r.Final
}

// converseTools is Converse's tool loop.
func converseTools(ctx context.Context, req *Request, ask Ask) (*workflow.Result, error) {
	box := req.Tools
	offered, err := box.Offered(ctx)
	if err != nil {
		return nil, err
	}
	progress := box.Progress()
	exchanges := append([]Exchange(nil), progress.Exchanges...)
	limit := int32(DefaultMaxToolCalls)
	if req.Agent.MaxToolCalls != nil {
		limit = *req.Agent.MaxToolCalls
	}
	var tokens, inputTokens int64
	var made int32
	for _, ex := range exchanges {
		tokens, inputTokens = tokens+ex.Turn.Tokens, inputTokens+ex.Turn.InputTokens
		for _, o := range ex.Outcomes {
			if o.Made {
				made++
			}
		}
	}
	usage := func(res *workflow.Result) *workflow.Result {
		res.Tokens += tokens
		res.InputTokens += inputTokens
		res.CountedTokens, res.CountedInputTokens = progress.CountedTokens, progress.CountedInputTokens
		res.ToolCalls, res.CountedToolCalls = made, progress.CountedCalls
		res.CountedCost, res.EarlierCost = progress.CountedCost, progress.Cost
		return res
	}
	for {
		if n := len(exchanges); n > 0 {
			if err := finishTurn(ctx, box, &exchanges[n-1], &made); err != nil {
				res, err := stopped(err)
				return usage(res), err
			}
		}
		// offer is nil only when the model must answer without tools; an agent whose servers
		// listed no tool is offered none, and a Scripted agent still makes its calls (their
		// errors are its results).
		offer := offered
		if made >= limit {
			offer = nil
		} else if offer == nil {
			offer = []OfferedTool{}
		}
		reply, err := ask(ctx, exchanges, offer)
		if err != nil {
			// An answer the provider could not use (a malformed fan-out) still used its tokens.
			if reply != nil {
				tokens, inputTokens = tokens+max(reply.Tokens, 0), inputTokens+max(reply.InputTokens, 0)
			}
			res, err := stopped(err)
			return usage(res), err
		}
		if reply == nil {
			reply = &Reply{}
		}
		if len(reply.Calls) == 0 || offer == nil {
			return usage(reply.answer()), nil
		}
		reply.Tokens = max(reply.Tokens, 0)
		reply.InputTokens = min(max(reply.InputTokens, 0), reply.Tokens)
		tokens, inputTokens = tokens+reply.Tokens, inputTokens+reply.InputTokens
		turn := Turn{Text: reply.Text, Calls: reply.Calls, Tokens: reply.Tokens, InputTokens: reply.InputTokens, Cost: reply.Cost}
		if err := box.Asked(ctx, &turn); err != nil {
			return usage(&workflow.Result{}), err
		}
		exchanges = append(exchanges, Exchange{Turn: turn})
	}
}

// observed is ask, with each call told to calls.
func observed(ask Ask, calls ModelCalls) Ask {
	return func(ctx context.Context, exchanges []Exchange, offered []OfferedTool) (*Reply, error) {
		ctx, done, err := calls.Call(ctx, exchanges)
		if err != nil {
			return nil, err
		}
		reply, err := ask(ctx, exchanges, offered)
		if reply == nil {
			reply = &Reply{}
		}
		done(reply, err)
		return reply, err
	}
}

// maxParallelCalls bounds the calls of one turn sent at once.
const maxParallelCalls = 8

// finishTurn makes the calls of a turn that have no outcome yet. They are checked in order (the
// Toolbox refuses calls past the step's limit, and the model is told so), and those to send are
// sent together; their outcomes come back in the calls' order. A call held at its gate, or a
// guard that stops the run, ends the turn there, once the calls before it are done.
func finishTurn(ctx context.Context, box Toolbox, ex *Exchange, made *int32) error {
	var ready []Prepared
	var stop error
	for i := len(ex.Outcomes); i < len(ex.Turn.Calls); i++ {
		p, err := box.Prepare(ctx, ex.Turn.Calls[i])
		if err != nil {
			stop = err
			break
		}
		ready = append(ready, p)
	}
	outs := make([]workflow.ToolOutcome, len(ready))
	errs := make([]error, len(ready))
	slots := make(chan struct{}, maxParallelCalls)
	var wg sync.WaitGroup
	for i, p := range ready {
		if p.Send == nil {
			outs[i] = p.Outcome
			continue
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			outs[i], errs[i] = p.Send(ctx)
		})
	}
	wg.Wait()
	for i, out := range outs {
		if errs[i] != nil {
			return errs[i]
		}
		if out.Made {
			*made++
		}
		ex.Outcomes = append(ex.Outcomes, out)
	}
	return stop
}

// functionName is what a model may call a function: OpenAI's rule.
var functionName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// FunctionName is the name a model calls a tool by: <server>__<tool>, with characters function
// names do not allow made underscores, and at most 64 characters (a long one ends in a digest).
// Server names are DNS labels, without underscores, so no tool's name is a handoff's
// (transfer_to_<agent>) or another server's.
func FunctionName(server, tool string) string {
	name := server + "__" + functionName.ReplaceAllString(tool, "_")
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(server + "/" + tool))
	return name[:55] + "_" + hex.EncodeToString(sum[:4])
}
