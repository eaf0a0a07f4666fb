package pacing

import (
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrForgotten is the error of a Grant handed to a waiter whose endpoint was forgotten (deleted)
// before its turn came, and of Acquire on such an endpoint.
var ErrForgotten = errors.New("pacing: the model endpoint was removed")

// Limits are an endpoint's shared limits; 0 means no limit of that kind.
type Limits struct {
	// RequestsPerMinute bounds the calls begun in any minute.
	RequestsPerMinute int64
	// TokensPerMinute bounds the tokens used in any minute.
	TokensPerMinute int64
	// MaxConcurrent bounds the calls in flight at once.
	MaxConcurrent int64
}

// Key names an endpoint: Kind is "ModelEndpoint" or "ClusterModelEndpoint", and Namespace is ""
// for a cluster one.
type Key struct {
	Kind, Namespace, Name string
}

// Ask is one model call's request for capacity.
type Ask struct {
	// Namespace is the line the call waits in: namespaces are served in turn.
	Namespace string
	// Run names the run (e.g. "ns/name"): the runs of a namespace are served in turn.
	Run string
	// Tokens is what to reserve: the request's estimated size plus its output cap.
	Tokens int64
}

// Use is a snapshot of an endpoint: its limits, what was used of them and who waits.
type Use struct {
	// Limits are the effective limits: the configured ones, lowered by the limits the server
	// reports, or the server's where none is configured.
	Limits Limits
	// RequestsLastMinute counts the calls begun in the last minute.
	RequestsLastMinute int64
	// TokensLastMinute counts the tokens of the calls begun in the last minute: reserved while a
	// call is in flight, used once it ended.
	TokensLastMinute int64
	// InFlight counts the calls granted and not yet done.
	InFlight int64
	// Waiting counts the asks not yet granted.
	Waiting int64
	// WaitingByNamespace counts the asks not yet granted by namespace; only namespaces with
	// waiters are present.
	WaitingByNamespace map[string]int64
	// RateLimited counts the 429s seen, in total.
	RateLimited int64
	// PausedUntil is when calls may be made again while the server asked everyone to wait; zero
	// when it did not.
	PausedUntil time.Time
}

// Pacer holds the endpoints of one operator process.
type Pacer struct {
	clk   clock.Clock
	after afterFunc

	mu        sync.Mutex
	endpoints map[Key]*Endpoint
}

// New returns a Pacer on clk (a real clock when nil). Its timers use clk's AfterFunc when it has
// one (the real and the fake clocks of k8s.io/utils do), else a timer and a goroutine each.
func New(clk clock.Clock) *Pacer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Pacer{clk: clk, after: afterFuncOf(clk), endpoints: map[Key]*Endpoint{}}
}

// Endpoint returns the endpoint named key, made on first use, with l as its configured limits.
// Waiters the new limits let through are admitted at once.
func (p *Pacer) Endpoint(key Key, l Limits) *Endpoint {
	p.mu.Lock()
	e, ok := p.endpoints[key]
	if !ok {
		e = newEndpoint(key, p.clk, p.after, l)
		p.endpoints[key] = e
	}
	p.mu.Unlock()
	if ok {
		e.setLimits(l)
	}
	return e
}

// Forget drops the endpoint named key (it was deleted). Its waiters are released: each ready is
// called with a Grant whose Err is ErrForgotten and whose Done does nothing, and later asks of that
// Endpoint are released the same way at once. Calls in flight are not interrupted; their Done
// changes nothing any longer. Endpoint(key, ...) afterwards starts afresh.
func (p *Pacer) Forget(key Key) {
	p.mu.Lock()
	e := p.endpoints[key]
	delete(p.endpoints, key)
	p.mu.Unlock()
	if e != nil {
		e.close()
	}
}

// Use is a snapshot of every endpoint.
func (p *Pacer) Use() map[Key]Use {
	p.mu.Lock()
	es := make([]*Endpoint, 0, len(p.endpoints))
	for _, e := range p.endpoints {
		es = append(es, e)
	}
	p.mu.Unlock()
	out := make(map[Key]Use, len(es))
	for _, e := range es {
		out[e.key] = e.Use()
	}
	return out
}

// afterFunc calls f once after d, unless the returned stop is called first.
type afterFunc func(d time.Duration, f func()) (stop func())

func afterFuncOf(clk clock.Clock) afterFunc {
	if c, ok := clk.(interface {
		AfterFunc(time.Duration, func()) clock.Timer
	}); ok {
		return func(d time.Duration, f func()) func() {
			t := c.AfterFunc(d, f)
			return func() { t.Stop() }
		}
	}
	// A clock without AfterFunc: one goroutine per armed timer, still not one per waiter.
	return func(d time.Duration, f func()) func() {
		t := clk.NewTimer(d)
		stop := make(chan struct{})
		go func() {
			select {
			case <-t.C():
				f()
			case <-stop:
			}
		}()
		var once sync.Once
		return func() {
			once.Do(func() {
				t.Stop()
				close(stop)
			})
		}
	}
}
