package pacing

import "time"

// Grant is the capacity for one call: a request, the tokens of its ask and, under MaxConcurrent, a
// place in flight, held until Done.
type Grant struct {
	e      *Endpoint
	ns     string
	tokens int64
	at     time.Time
	done   bool // guarded by e.mu
	err    error
}

// Err is nil for a grant to make the call, ErrForgotten when the endpoint was removed before the
// ask's turn (no call may be made on it).
func (g *Grant) Err() error {
	return g.err
}

// Done ends the call: it releases its place in flight, settles the reserved tokens against
// usedTokens (fewer are given back; more are debt that delays later calls, counted up to a
// minute's worth above the reservation), and learns from the server's answer s. It is idempotent.
// A grant whose call was never made is Done(0, Signal{}); one the server turned away with a 429 is
// Done(0, ReadSignal(...)) before the ask is requeued.
func (g *Grant) Done(usedTokens int64, s Signal) {
	e := g.e
	if e == nil {
		return
	}
	e.mu.Lock()
	if g.done {
		e.mu.Unlock()
		return
	}
	g.done = true
	now := e.clk.Now()
	e.release(g)
	debt := e.tokens.perMin
	if debt == 0 {
		debt = maxCount
	}
	used := min(max(usedTokens, 0), g.tokens+debt)
	e.tokens.take(now, used)
	e.used.settle(g.at, used-g.tokens)
	e.learn(now, s, g.at)
	calls := e.admit(now)
	e.mu.Unlock()
	run(calls)
}
