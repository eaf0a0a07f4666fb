package pacing

import (
	"net/http"
	"sync"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

var (
	t0      = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	testKey = Key{Kind: "ModelEndpoint", Namespace: "models", Name: "gpt"}
)

// failer is what the harness needs of a *testing.T, *testing.B or *rapid.T.
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// harness drives one endpoint on a fake clock and records what its callbacks get.
type harness struct {
	t   failer
	clk *testclock.FakeClock
	p   *Pacer
	e   *Endpoint

	mu      sync.Mutex
	granted []*taken
}

// taken is one ask as the test follows it.
type taken struct {
	ask    Ask
	cancel func() bool
	grant  *Grant
	calls  int
	// What the test did with it: cancelled (and cancel said so), or ended with used tokens.
	cancelled, done bool
	used            int64
}

func newHarness(t failer, l Limits) *harness {
	clk := testclock.NewFakeClock(t0)
	p := New(clk)
	return &harness{t: t, clk: clk, p: p, e: p.Endpoint(testKey, l)}
}

// ask queues an ask of tokens for namespace ns and run "ns/r".
func (h *harness) ask(ns string, tokens int64) *taken {
	return h.enqueue(Ask{Namespace: ns, Run: ns + "/r", Tokens: tokens}, false)
}

func (h *harness) enqueue(a Ask, front bool) *taken {
	k := &taken{ask: a}
	ready := func(g *Grant) {
		h.mu.Lock()
		defer h.mu.Unlock()
		k.calls++
		k.grant = g
		h.granted = append(h.granted, k)
	}
	if front {
		k.cancel = h.e.Requeue(a, ready)
	} else {
		k.cancel = h.e.Enqueue(a, ready)
	}
	return k
}

// step moves the clock on and waits for the wake-ups it caused.
func (h *harness) step(d time.Duration) {
	h.clk.Step(d)
	h.e.wakes.Wait()
}

// got reports whether k was granted, under the harness's lock.
func (h *harness) got(k *taken) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return k.grant != nil
}

// order is the asks granted so far, in order.
func (h *harness) order() []*taken {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*taken(nil), h.granted...)
}

// since is the asks granted after the first n, in order.
func (h *harness) since(n int) []*taken {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*taken(nil), h.granted[n:]...)
}

// mustGet fails unless k was granted, and returns its grant.
func (h *harness) mustGet(k *taken) *Grant {
	h.t.Helper()
	if !h.got(k) {
		h.t.Fatalf("ask %+v not granted at %v; use %+v", k.ask, h.clk.Now().Sub(t0), h.e.Use())
	}
	return k.grant
}

// mustWait fails if k was granted.
func (h *harness) mustWait(k *taken) {
	h.t.Helper()
	if h.got(k) {
		h.t.Fatalf("ask %+v granted at %v, want it waiting", k.ask, h.clk.Now().Sub(t0))
	}
}

// answer is a server's answer with the given status and headers (name, value pairs), read at t0.
func answer(status int, kv ...string) Signal {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return ReadSignal(status, h, t0)
}
