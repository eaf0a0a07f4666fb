package pacing

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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
		h.step(100 * time.Millisecond)
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
