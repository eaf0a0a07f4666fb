package steps

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/pacing"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/workflow"
)

// Every step is metered. Each of its model calls is checked against the caps of its namespace's
// AgentQuotas, its worst case reserved in the ledger until it settles (quota.go), and what it
// used is booked with the record that follows it. A step on a model endpoint also waits for the
// endpoint's capacity (the first call before the step has a goroutine or a slot, in the
// endpoint's line; the later ones of a tool loop in the step's goroutine), tells the endpoint's
// pacer what the server said of its limits, and is priced from the endpoint's prices; a call
// whose worst case could pass the run's cost budget is not made.

// minOutputTokens is the fewest output tokens a call under a cost budget is allowed: a call the
// budget cannot pay this much output for is not made.
const minOutputTokens = 16

// paced is a step on a model endpoint: the endpoint's line, what the step asks of it, and what
// meters its calls.
type paced struct {
	endpoint *pacing.Endpoint
	key      pacing.Key
	ask      pacing.Ask
	meter    *meter
}

// meter is what a step on a model endpoint keeps of its calls.
type meter struct {
	endpoint *pacing.Endpoint
	ask      pacing.Ask
	// prompt estimates the prompt tokens of the step's first call.
	prompt   int64
	price    cost.Price
	priced   bool
	currency string
	// spent is what the run had spent when the step started; limit, when limited, its budget.
	spent   decimal.Decimal
	limit   decimal.Decimal
	limited bool
	// outputCap is the output-token cap of each call: the agent's, lowered to what the budget
	// can pay for; 0 when neither bounds it.
	outputCap int64
	// reserve is what the run keeps back for its wrap-up turn (limits.wrapUp), on every step
	// before it: no call is made that would leave less.
	reserve wrapUpReserve
	// free marks a Scripted agent's step: its turns cost nothing.
	free bool
	// next is told of each call too: the step's traces.
	next agents.ModelCalls
	// quota is the namespace's caps and ledger, and what the step's calls settled that no
	// record booked yet.
	quota quotaMeter

	mu sync.Mutex
	// grant is the capacity the step was admitted with, for its first call.
	grant *pacing.Grant
	calls int
	cost  decimal.Decimal
	// turnedAway is set when the server answered the step's first call 429: nothing was done
	// yet, so the step goes back into the endpoint's line rather than fail.
	turnedAway bool
}

// onEndpoint meters a step of an agent on endpoint e, in a run that spent spent so far: its
// calls are paced, priced and held to the run's cost budget.
func (m *meter) onEndpoint(e *endpoints.Endpoint, pace *pacing.Endpoint, model v1alpha1.ModelSpec, spent decimal.Decimal, limits workflow.EffectiveLimits) {
	m.endpoint, m.spent, m.currency = pace, spent, e.Prices.Currency()
	m.price, m.priced = e.Prices.For(model.Name)
	m.limit, m.limited = limits.MaxCost()
	if model.MaxOutputTokens != nil {
		m.outputCap = int64(*model.MaxOutputTokens)
	}
}

// admitted gives the step the capacity it was admitted with, for its first call.
func (m *meter) admitted(g *pacing.Grant) {
	m.mu.Lock()
	m.grant = g
	m.mu.Unlock()
}

// release gives back capacity the step was admitted with and never used.
func (m *meter) release() {
	m.mu.Lock()
	g := m.grant
	m.grant = nil
	m.mu.Unlock()
	if g != nil {
		g.Done(0, pacing.Signal{})
	}
}

// Call checks the call against the run's cost budget, waits for the endpoint's capacity, and
// returns the call's context, in which the server's answers reach the pacer, and what to do
// once the model answered.
func (m *meter) Call(ctx context.Context, exchanges []agents.Exchange) (context.Context, func(*agents.Reply, error), error) {
	input := m.prompt + exchangeTokens(exchanges)
	if err := m.affordable(input); err != nil {
		m.release()
		return ctx, nil, err
	}
	reserved, err := m.quota.reserve(ctx, m.worst(input))
	if err != nil {
		m.release()
		return ctx, nil, err
	}
	m.mu.Lock()
	g, first := m.grant, m.calls == 0
	m.grant = nil
	m.calls++
	m.mu.Unlock()
	if g == nil && m.endpoint != nil {
		ask := m.ask
		ask.Tokens = input + m.outputCap
		if g, err = m.endpoint.Acquire(ctx, ask); err != nil {
			reserved.Release()
			return ctx, nil, err
		}
	}
	var (
		smu    sync.Mutex
		signal pacing.Signal
	)
	ctx = agents.Paced(ctx, func(status int, h http.Header) {
		smu.Lock()
		signal = pacing.ReadSignal(status, h, time.Now())
		smu.Unlock()
	})
	var nextDone func(*agents.Reply, error)
	if m.next != nil {
		var err error
		if ctx, nextDone, err = m.next.Call(ctx, exchanges); err != nil {
			if g != nil {
				g.Done(0, pacing.Signal{})
			}
			reserved.Release()
			return ctx, nil, err
		}
	}
	return ctx, func(reply *agents.Reply, err error) {
		smu.Lock()
		s := signal
		smu.Unlock()
		if g != nil {
			g.Done(max(reply.Tokens, 0), s)
		}
		spent := m.answered(reply, s.RateLimited && first)
		m.quota.settle(reserved, reply.Tokens, spent)
		if nextDone != nil {
			nextDone(reply, err)
		}
	}, nil
}

// answered prices a call's answer, and says on the reply what it cost; rateLimited marks a
// first call the server turned away.
func (m *meter) answered(reply *agents.Reply, rateLimited bool) decimal.Decimal {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rateLimited {
		m.turnedAway = true
	}
	if !m.priced {
		return decimal.Zero
	}
	c := m.price.Of(cost.Reported(reply.Tokens, reply.InputTokens, reply.CachedInputTokens))
	m.cost = m.cost.Add(c)
	reply.Cost = cost.Format(c)
	return c
}

// defaultReserveOutput is the output a call of an agent with no maxOutputTokens is reserved
// for against its namespace's caps: what it uses beyond is counted once it answered.
const defaultReserveOutput = 4096

// worst is the worst case of a call of about input prompt tokens, as its namespace's caps see
// it: its prompt and the most output it may get back, at its model's price. A Scripted agent's
// turn costs nothing and says its own tokens.
func (m *meter) worst(input int64) quota.Call {
	if m.free {
		return quota.Call{Tokens: input, Free: true}
	}
	output := m.outputCap
	if output <= 0 {
		output = defaultReserveOutput
	}
	c := quota.Call{Tokens: input + output, Currency: m.currency, Priced: m.priced}
	if m.priced {
		c.Cost = m.price.Worst(input, output)
	}
	return c
}

// affordable says why a call of about input prompt tokens may not be made: its worst case
// could pass the run's cost budget.
func (m *meter) affordable(input int64) error {
	if !m.limited || !m.priced {
		return nil
	}
	m.mu.Lock()
	spent := m.spent.Add(m.cost)
	m.mu.Unlock()
	output := max(m.outputCap, minOutputTokens)
	worst := m.price.Worst(input, output)
	kept := m.reserve.of(input + output + m.reserve.prompt)
	if cost.Fits(spent, worst.Add(kept), m.limit) {
		return nil
	}
	msg := fmt.Sprintf("cost budget: %s of %s %s spent; the next model call could cost up to %s (about %d prompt tokens and %d output tokens)",
		cost.Format(spent), cost.Format(m.limit), m.currency, cost.Format(worst), input, output)
	if kept.IsPositive() {
		msg += fmt.Sprintf(", and %s is kept for %s's wrap-up turn", cost.Format(kept), m.reserve.agent)
	}
	return &workflow.ToolTrip{Reason: v1alpha1.ReasonCostBudgetExceeded, Message: msg + ", so it was not made"}
}

// capOutput lowers the agent's output cap to what the run's budget can pay for on the step's
// first call, so that a call the meter lets through cannot pass the budget.
func (m *meter) capOutput(model *v1alpha1.ModelSpec) {
	if !m.limited || !m.priced || m.price.Output.IsZero() {
		return
	}
	// Each output token costs its price, and its price again as prompt of the wrap-up turn.
	left := m.limit.Sub(m.spent).Sub(m.price.Worst(m.prompt, 0)).Sub(m.reserve.of(m.prompt + m.reserve.prompt))
	affordable := left.Mul(decimal.NewFromInt(1_000_000)).Div(m.price.Output.Add(m.reserve.perToken())).Floor()
	if !affordable.IsPositive() {
		return
	}
	most := affordable.IntPart()
	if m.outputCap == 0 || most < m.outputCap {
		m.outputCap = min(most, 1<<20)
		c := int32(m.outputCap)
		model.MaxOutputTokens = &c
	}
}

// result adds what the step's calls cost to its result: to what its calls cost before it was
// last held at a tool's gate (CountedCost, already in the run's status), if it was.
func (m *meter) result(res *workflow.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.priced {
		return
	}
	// What the step's calls cost before this execution: counted at its gates, or read from
	// its turns' records (a step held at a cap, or cut short by a restart, goes on).
	before := decimal.Max(cost.Amount(res.CountedCost), cost.Amount(res.EarlierCost))
	res.Cost = cost.Format(before.Add(m.cost))
	res.Currency = m.currency
}

// reset readies the meter for the step's second attempt, after its first call was turned away.
func (m *meter) reset() {
	m.release()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.turnedAway, m.calls, m.cost = false, 0, decimal.Zero
}

// rateLimited reports whether the server turned the step's first call away.
func (m *meter) rateLimited() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turnedAway
}

// exchangeTokens estimates the prompt tokens a step's tool exchanges add to its next call.
func exchangeTokens(exchanges []agents.Exchange) int64 {
	var bytes int64
	messages := 0
	for _, ex := range exchanges {
		bytes += int64(len(ex.Turn.Text))
		for _, c := range ex.Turn.Calls {
			bytes += int64(len(c.Arguments) + len(c.Tool) + len(c.Server))
		}
		for _, o := range ex.Outcomes {
			bytes += int64(len(o.Content))
		}
		messages += 1 + len(ex.Outcomes)
	}
	if messages == 0 {
		return 0
	}
	return cost.EstimateTokens(bytes, messages)
}

// defaultWrapUpOutput is the output tokens kept for a wrap-up agent with no maxOutputTokens.
const defaultWrapUpOutput = 1024

// wrapUpReserve is the worst case of a run's wrap-up turn, kept back by the steps before it: the
// wrap-up agent's price for a prompt as long as the call's, its answer and what the wrap-up
// agent's own instructions add, and its output cap.
type wrapUpReserve struct {
	agent  string
	price  cost.Price
	output int64
	// prompt is what the wrap-up turn's prompt has beyond the call's: its agent's instructions
	// and the word that a limit ran out.
	prompt int64
}

// of is the reserve when the wrap-up turn's prompt is about input tokens: none without a
// priced wrap-up agent.
func (r wrapUpReserve) of(input int64) decimal.Decimal {
	if r.agent == "" {
		return decimal.Zero
	}
	return r.price.Worst(input, r.output)
}

// perToken is what each more token of the run's context adds to the reserve.
func (r wrapUpReserve) perToken() decimal.Decimal {
	if r.agent == "" {
		return decimal.Zero
	}
	return decimal.Max(r.price.Input, r.price.CachedInput)
}
