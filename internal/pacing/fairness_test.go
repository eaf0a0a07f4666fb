package pacing

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestANamespaceWithOneCallIsServedWithinARound(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1})
	held := h.ask("a", 1)
	for range 1000 {
		h.ask("a", 1)
	}
	b := h.ask("b", 1)
	h.mustGet(held).Done(1, Signal{})
	h.order()[1].grant.Done(1, Signal{})
	if got := h.order()[1:3]; got[0] != b && got[1] != b {
		t.Fatalf("the next 2 grants went to %s and %s, want b among them", got[0].ask.Namespace, got[1].ask.Namespace)
	}
}

// TestGrantsAreSharedFairlyAcrossNamespaces queues unequal numbers of asks of unequal sizes in 50
// namespaces, paced by requests and tokens per minute, and measures Jain's index of the grants
// each namespace got while all of them had asks waiting: 1 is an equal share, 1/50 all to one.
func TestGrantsAreSharedFairlyAcrossNamespaces(t *testing.T) {
	const namespaces = 50
	h := newHarness(t, Limits{RequestsPerMinute: 600, TokensPerMinute: 300_000, MaxConcurrent: 20})
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range namespaces {
		ns := fmt.Sprintf("ns-%02d", i)
		for range 20 + rnd.IntN(200) {
			h.ask(ns, 100+rnd.Int64N(5000))
		}
		// Namespaces queue one after another; the first take what is there meanwhile.
		h.step(10 * time.Millisecond)
	}
	grants := map[string]int{}
	all := len(h.order()) // from here on, every namespace has asks waiting
	for seen := 0; ; {
		got := h.order()
		for i, k := range got[seen:] {
			if seen+i >= all {
				grants[k.ask.Namespace]++
			}
			k.grant.Done(k.ask.Tokens/2, answer(200))
		}
		seen = len(got)
		if len(h.e.Use().WaitingByNamespace) < namespaces {
			break
		}
		h.step(200 * time.Millisecond)
	}
	var sum, squares float64
	for i := range namespaces {
		x := float64(grants[fmt.Sprintf("ns-%02d", i)])
		sum += x
		squares += x * x
	}
	jain := sum * sum / (namespaces * squares)
	t.Logf("Jain's index %.4f over %.0f grants", jain, sum)
	if jain < 0.95 {
		t.Fatalf("Jain's index %.4f < 0.95; grants %v", jain, grants)
	}
}

// hugeAsk is an output cap of a million tokens, more than any bucket here holds.
const hugeAsk = 1 << 20

// TestAHugeAskCannotCutAnotherNamespacesShare has one namespace ask for a million-token output
// cap on every call (and use a few hundred), beside N-1 namespaces of ordinary calls, all of
// them with work waiting throughout: each of the others is still granted at least 0.9 x R/N
// calls a minute.
func TestAHugeAskCannotCutAnotherNamespacesShare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "namespaces")
		rpm := rapid.SampledFrom([]int64{60, 600, 3000}).Draw(t, "rpm")
		latency := rapid.SampledFrom([]time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}).Draw(t, "latency")
		l := Limits{RequestsPerMinute: rpm, TokensPerMinute: rpm * 3000}
		grants := shareUnderHugeAsks(t, l, n, latency)
		want := 0.9 * float64(rpm) / float64(n)
		for i := 1; i < n; i++ {
			ns := fmt.Sprintf("ns-%d", i)
			if got := float64(grants[ns]); got < want { // over one minute
				t.Fatalf("%s got %.1f calls a minute beside a namespace of huge asks, want >= %.1f (R %d, N %d); grants %v",
					ns, got, want, rpm, n, grants)
			}
		}
	})
}

// shareUnderHugeAsks runs the endpoint for 70 seconds with every namespace's line kept full,
// calls answered latency after their grant, and counts the grants of each namespace in the last
// minute. Namespace "huge" asks hugeAsk tokens a call, the others 1,500; every call uses 500
// to 600.
func shareUnderHugeAsks(t failer, l Limits, n int, latency time.Duration) map[string]int {
	h := newHarness(t, l)
	waiting := map[string]int{}
	fill := func() {
		for i := range n {
			ns := fmt.Sprintf("ns-%d", i)
			tokens := int64(1500)
			if i == 0 {
				ns, tokens = "huge", hugeAsk
			}
			for ; waiting[ns] < 30; waiting[ns]++ {
				h.ask(ns, tokens)
			}
		}
	}
	grants := map[string]int{}
	var inFlight []*taken
	seen := 0
	for now := time.Duration(0); now < 70*time.Second; now += 200 * time.Millisecond {
		fill()
		got := h.since(seen)
		seen += len(got)
		for _, k := range got {
			waiting[k.ask.Namespace]--
			inFlight = append(inFlight, k)
			if now >= 10*time.Second {
				grants[k.ask.Namespace]++
			}
		}
		kept := inFlight[:0]
		for _, k := range inFlight {
			if h.clk.Now().Sub(k.grant.at) < latency {
				kept = append(kept, k)
				continue
			}
			used := int64(500)
			if k.ask.Namespace == "huge" {
				used = 600
			}
			k.grant.Done(used, answer(200))
		}
		inFlight = kept
		h.step(200 * time.Millisecond)
	}
	return grants
}
