package pacing

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// BenchmarkGrant is one call's whole way through an endpoint that has room: Enqueue, the grant,
// Done with an answer to learn from.
func BenchmarkGrant(b *testing.B) {
	for name, l := range map[string]Limits{
		"unlimited": {},
		// Limits high enough never to make anyone wait, so the buckets are used but never empty.
		"limited": {RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, MaxConcurrent: 1 << 20},
	} {
		b.Run(name, func(b *testing.B) {
			e := New(clock.RealClock{}).Endpoint(testKey, l)
			ask := Ask{Namespace: "ns", Run: "ns/run", Tokens: 2000}
			sig := answer(200)
			var g *Grant
			ready := func(got *Grant) { g = got }
			b.ReportAllocs()
			for b.Loop() {
				e.Enqueue(ask, ready)
				g.Done(1500, sig)
			}
		})
	}
}

// BenchmarkGrantParallel is BenchmarkGrant from many goroutines at once on one endpoint.
func BenchmarkGrantParallel(b *testing.B) {
	e := New(clock.RealClock{}).Endpoint(testKey, Limits{RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50})
	sig := answer(200)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ask := Ask{Namespace: "ns", Run: "ns/run", Tokens: 2000}
		var g *Grant
		ready := func(got *Grant) { g = got }
		for pb.Next() {
			e.Enqueue(ask, ready)
			g.Done(1500, sig)
		}
	})
}

// BenchmarkWaiting measures the memory 10,000 waiting asks take, spread over 100 namespaces of
// 10 runs each, counting what the caller keeps (the cancel func) and not its ready callback.
func BenchmarkWaiting(b *testing.B) {
	const waiters = 10_000
	asks := make([]Ask, waiters)
	for i := range asks {
		ns := fmt.Sprintf("ns-%d", i%100)
		asks[i] = Ask{Namespace: ns, Run: fmt.Sprintf("%s/run-%d", ns, i%1000/100), Tokens: 2000}
	}
	ready := func(*Grant) {}
	cancels := make([]func() bool, waiters)
	var perWaiter float64
	for b.Loop() {
		clear(cancels) // the last round's endpoint is freed before, not during, the count
		e := New(clock.RealClock{}).Endpoint(testKey, Limits{MaxConcurrent: 1})
		e.Enqueue(Ask{Namespace: "held"}, ready)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i, a := range asks {
			cancels[i] = e.Enqueue(a, ready)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perWaiter = float64(after.HeapAlloc-before.HeapAlloc) / waiters
		if e.Use().Waiting != waiters {
			b.Fatalf("waiting %d, want %d", e.Use().Waiting, waiters)
		}
		runtime.KeepAlive(e)
	}
	b.ReportMetric(perWaiter, "B/waiter")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkShareUnderHugeAsks is TestAHugeAskCannotCutAnotherNamespacesShare at a provider
// account's scale: 10 namespaces on an endpoint of 6,000 requests and 6,000,000 tokens a minute,
// calls of 1 s, one namespace asking for a million-token output cap on every call. It reports the
// least share of the others, and the huge namespace's, as a fraction of R/N calls a minute.
func BenchmarkShareUnderHugeAsks(b *testing.B) {
	const namespaces, rpm = 10, 6000
	var least, huge float64
	for b.Loop() {
		grants := shareUnderHugeAsks(b, Limits{RequestsPerMinute: rpm, TokensPerMinute: 6_000_000}, namespaces, time.Second)
		fair := float64(rpm) / namespaces
		least = math.Inf(1)
		for i := 1; i < namespaces; i++ {
			least = min(least, float64(grants[fmt.Sprintf("ns-%d", i)])/fair)
		}
		huge = float64(grants["huge"]) / fair
	}
	b.ReportMetric(least, "least-share/fair")
	b.ReportMetric(huge, "huge-share/fair")
	b.ReportMetric(0, "ns/op")
}
