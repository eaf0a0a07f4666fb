package pacing

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Endpoint paces the calls against one endpoint. Its methods are safe for concurrent use.
type Endpoint struct {
	key   Key
	clk   clock.Clock
	after afterFunc

	mu sync.Mutex
	// configured are the limits the endpoint's object sets, learned those the server reported
	// (0: not reported), eff what is enforced.
	configured, learned, eff Limits
	requests, tokens         bucket
	// reserved is the tokens held by the calls in flight, inFlight their number; held is
	// what each namespace's calls in flight hold.
	reserved, inFlight int64
	held               map[string]*nsHeld
	queue              lines
	used               window
	rateLimited        int64
	// pausedUntil is when the server lets calls through again; limitedAt is the last fresh 429
	// and streak the number of fresh 429s in a row, for the backoff.
	pausedUntil, limitedAt time.Time
	streak                 int
	// The one timer: when it fires, stop cancels it, gen tells a wake of a replaced timer.
	timerAt time.Time
	stop    func()
	gen     uint64
	gone    bool

	// wakes counts the timer's wake-ups under way, so tests can wait for them.
	wakes sync.WaitGroup
}

// call is a ready callback to make once the lock is released.
type call struct {
	ready func(*Grant)
	g     *Grant
}

func newEndpoint(key Key, clk clock.Clock, after afterFunc, l Limits) *Endpoint {
	e := &Endpoint{key: key, clk: clk, after: after}
	e.configured = clean(l)
	e.applyLimits(clk.Now())
	return e
}

// Enqueue queues ask without any goroutine of its own. ready is called exactly once with the Grant
// when capacity is there: maybe before Enqueue returns (in the caller's goroutine), else from a
// later Enqueue, Done or cancel in another goroutine, or from the endpoint's timer; always outside
// the pacer's locks, and it should be quick (hand the grant on, do not make the call in it). cancel
// takes the ask out if it was not granted yet and reports whether it did; false means ready was or
// is being called, and the caller owns that Grant (Done(0, Signal{}) if the call is not made).
func (e *Endpoint) Enqueue(ask Ask, ready func(*Grant)) (cancel func() bool) {
	return e.enqueue(ask, ready, false)
}

// Requeue is Enqueue at the front of its run's line, which is then the next of its namespace: for
// a call the server turned away (429), which already waited its turn.
func (e *Endpoint) Requeue(ask Ask, ready func(*Grant)) (cancel func() bool) {
	return e.enqueue(ask, ready, true)
}

func (e *Endpoint) enqueue(ask Ask, ready func(*Grant), front bool) func() bool {
	w := &waiter{ask: ask, ready: ready}
	e.mu.Lock()
	if e.gone {
		e.mu.Unlock()
		ready(&Grant{err: ErrForgotten})
		return func() bool { return false }
	}
	e.queue.push(w, front)
	calls := e.admit(e.clk.Now())
	e.mu.Unlock()
	run(calls)
	return func() bool { return e.cancel(w) }
}

func (e *Endpoint) cancel(w *waiter) bool {
	e.mu.Lock()
	if w.line == nil {
		e.mu.Unlock()
		return false
	}
	e.queue.remove(w)
	// The waiter may have been the head that held the others back.
	calls := e.admit(e.clk.Now())
	e.mu.Unlock()
	run(calls)
	return true
}

// Acquire waits in the caller's goroutine until ask is granted or ctx ends; for a step's later
// calls. When ctx ends first it returns ctx's error and holds nothing.
func (e *Endpoint) Acquire(ctx context.Context, ask Ask) (*Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	got := make(chan *Grant, 1)
	cancel := e.Enqueue(ask, func(g *Grant) { got <- g })
	select {
	case g := <-got:
		if g.err != nil {
			return nil, g.err
		}
		return g, nil
	case <-ctx.Done():
		if !cancel() {
			(<-got).Done(0, Signal{})
		}
		return nil, ctx.Err()
	}
}

// Observe learns from an answer that came without a Grant (e.g. a retry the transport made on its
// own), as Grant.Done does.
func (e *Endpoint) Observe(s Signal) {
	e.mu.Lock()
	now := e.clk.Now()
	e.learn(now, s, time.Time{})
	calls := e.admit(now)
	e.mu.Unlock()
	run(calls)
}

// Use is a snapshot of the endpoint.
func (e *Endpoint) Use() Use {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clk.Now()
	u := Use{
		Limits:             e.eff,
		InFlight:           e.inFlight,
		Waiting:            e.queue.waiting,
		WaitingByNamespace: e.queue.byNamespace(),
		RateLimited:        e.rateLimited,
	}
	u.RequestsLastMinute, u.TokensLastMinute = e.used.sum(now)
	if now.Before(e.pausedUntil) {
		u.PausedUntil = e.pausedUntil
	}
	return u
}

// setLimits makes l the configured limits and admits whoever they let through.
func (e *Endpoint) setLimits(l Limits) {
	e.mu.Lock()
	if clean(l) == e.configured {
		e.mu.Unlock()
		return
	}
	now := e.clk.Now()
	e.configured = clean(l)
	e.applyLimits(now)
	calls := e.admit(now)
	e.mu.Unlock()
	run(calls)
}

// close releases every waiter with ErrForgotten and stops the timer, for good.
func (e *Endpoint) close() {
	e.mu.Lock()
	e.gone = true
	ws := e.queue.drain()
	e.arm(time.Time{}, time.Time{})
	e.mu.Unlock()
	g := &Grant{err: ErrForgotten}
	for _, w := range ws {
		w.ready(g)
	}
}

// admit grants the waiters that can go at now, in turn, and sets the timer for when the next
// could. It returns the callbacks to make after unlocking.
func (e *Endpoint) admit(now time.Time) []call {
	var calls []call
	// A grant moves its namespace from waiting to in flight, or keeps it in both: the namespaces
	// that share the bucket, and so the share, stay as they are while admit grants.
	share := e.share()
	for {
		w, tokens, at := e.next(now, share)
		if w == nil {
			e.arm(now, at)
			return calls
		}
		e.queue.take(w)
		calls = append(calls, call{ready: w.ready, g: e.grant(now, w.ask, tokens)})
	}
}

// next is the waiter that may go at now and the tokens it reserves under share: the head of the
// namespace whose turn it is. That head is never skipped for a smaller ask behind it, so a large
// ask is not starved, with one exception: while its namespace's calls in flight hold the namespace's share
// of the tokens bucket and the bucket has no room for it, the next namespace's head is tried. A
// namespace's own calls keep it waiting then, not the others'. When no waiter may go, at is the
// earliest time one could, zero when only a call's end can tell.
func (e *Endpoint) next(now time.Time, share int64) (w *waiter, tokens int64, at time.Time) {
	first := e.queue.next
	if first == nil {
		return nil, 0, time.Time{}
	}
	for ns := first; ; {
		head := ns.next.head
		tokens = reservation(head.ask.Tokens, share)
		when, ok, short := e.admissible(now, tokens)
		if ok {
			return head, tokens, time.Time{}
		}
		at = earliest(at, when)
		if ns = ns.succ; !short || e.heldBy(head.ask.Namespace) < share || ns == first {
			return nil, 0, at
		}
	}
}

// admissible reports whether an ask of tokens may go at now; if not, the earliest time it could,
// or zero when only a call ending can let it (the concurrency bound, or a bucket too small beside
// the tokens held in flight), and whether the tokens bucket alone holds it back.
func (e *Endpoint) admissible(now time.Time, tokens int64) (at time.Time, ok, short bool) {
	if now.Before(e.pausedUntil) {
		return e.pausedUntil, false, false
	}
	if e.eff.MaxConcurrent > 0 && e.inFlight >= e.eff.MaxConcurrent {
		return time.Time{}, false, false
	}
	r := e.requests.wait(now, 0, 1)
	t := e.tokens.wait(now, e.reserved, max(tokens, 0))
	switch {
	case r == 0 && t == 0:
		return time.Time{}, true, false
	case r < 0 || t < 0:
		return time.Time{}, false, r == 0
	default:
		return now.Add(max(r, t)), false, r == 0
	}
}

func (e *Endpoint) grant(now time.Time, ask Ask, tokens int64) *Grant {
	e.requests.take(now, 1)
	e.reserved += tokens
	e.inFlight++
	h := e.held[ask.Namespace]
	if h == nil {
		if e.held == nil {
			e.held = map[string]*nsHeld{}
		}
		h = &nsHeld{}
		e.held[ask.Namespace] = h
	}
	h.calls++
	h.tokens += tokens
	e.used.add(now, tokens)
	return &Grant{e: e, ns: ask.Namespace, tokens: tokens, at: now}
}

// release gives back what a grant holds in flight.
func (e *Endpoint) release(g *Grant) {
	e.inFlight--
	e.reserved -= g.tokens
	if h := e.held[g.ns]; h != nil {
		if h.calls--; h.calls <= 0 {
			delete(e.held, g.ns)
		} else {
			h.tokens -= g.tokens
		}
	}
}

// arm sets the endpoint's one timer for at, or stops it when at is zero. A timer already set for
// at is kept.
func (e *Endpoint) arm(now, at time.Time) {
	if e.stop != nil && e.timerAt.Equal(at) {
		return
	}
	if e.stop != nil {
		e.stop()
		e.stop, e.timerAt = nil, time.Time{}
	}
	if at.IsZero() || e.gone {
		return
	}
	e.gen++
	gen := e.gen
	e.timerAt = at
	// A fake clock runs the callback while holding its own lock, so the wake, which reads the
	// clock and sets the next timer, runs in a goroutine of its own.
	e.stop = e.after(at.Sub(now), func() {
		e.wakes.Add(1)
		go e.wake(gen)
	})
}

func (e *Endpoint) wake(gen uint64) {
	defer e.wakes.Done()
	e.mu.Lock()
	if gen == e.gen {
		e.stop, e.timerAt = nil, time.Time{}
	}
	calls := e.admit(e.clk.Now())
	e.mu.Unlock()
	run(calls)
}

func run(calls []call) {
	for _, c := range calls {
		c.ready(c.g)
	}
}

// clean reads negative limits as none.
func clean(l Limits) Limits {
	return Limits{
		RequestsPerMinute: max(l.RequestsPerMinute, 0),
		TokensPerMinute:   max(l.TokensPerMinute, 0),
		MaxConcurrent:     max(l.MaxConcurrent, 0),
	}
}
