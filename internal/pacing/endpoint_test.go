package pacing

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

func TestConcurrencyBoundsGrantsNotDone(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 2})
	a, b, c := h.ask("a", 10), h.ask("a", 10), h.ask("a", 10)
	h.mustGet(a)
	h.mustGet(b)
	h.mustWait(c)
	a.grant.Done(10, Signal{})
	a.grant.Done(10, Signal{}) // idempotent: frees one place, not two
	h.mustGet(c)
	if u := h.e.Use(); u.InFlight != 2 || u.Waiting != 0 {
		t.Fatalf("use = %+v, want 2 in flight and none waiting", u)
	}
}

func TestRequestsPerMinuteRefillsContinuously(t *testing.T) {
	// 60 a minute: a bucket of 10, one more each second.
	h := newHarness(t, Limits{RequestsPerMinute: 60})
	var ks []*taken
	for range 12 {
		ks = append(ks, h.ask("a", 0))
	}
	for _, k := range ks[:10] {
		h.mustGet(k)
	}
	h.mustWait(ks[10])
	h.step(999 * time.Millisecond)
	h.mustWait(ks[10])
	h.step(time.Millisecond)
	h.mustGet(ks[10])
	h.mustWait(ks[11])
	h.step(time.Second)
	h.mustGet(ks[11])
}

func TestTokensAreReservedThenSettled(t *testing.T) {
	// 600 a minute: a bucket of 100, 10 more each second.
	h := newHarness(t, Limits{TokensPerMinute: 600})
	a := h.ask("a", 60)
	b := h.ask("a", 60)
	h.mustGet(a)
	h.mustWait(b) // 40 left beside the 60 reserved
	a.grant.Done(20, Signal{})
	h.mustGet(b) // 40 of a's reservation came back: 80 left
	c := h.ask("a", 60)
	h.mustWait(c)
	b.grant.Done(90, Signal{}) // 30 over its reservation: debt, 100-20-90 = -10 left
	h.mustWait(c)
	h.step(6999 * time.Millisecond)
	h.mustWait(c)
	h.step(time.Millisecond)
	h.mustGet(c)
}

func TestAnAskLargerThanItsShareReservesTheShareAndPaysTheRestAsDebt(t *testing.T) {
	h := newHarness(t, Limits{TokensPerMinute: 600}) // a bucket of 100
	big := h.ask("b", 250)
	h.mustGet(big) // alone: its share is the bucket, and it reserves that, not 250
	small := h.ask("a", 30)
	h.step(time.Hour)
	h.mustWait(small) // the bucket is full, but big holds it all
	big.grant.Done(250, Signal{})
	h.mustWait(small) // 100 - 250: the debt is paid before anyone goes on
	h.step(17900 * time.Millisecond)
	h.mustWait(small)
	h.step(100 * time.Millisecond)
	h.mustGet(small)
}

func TestANamespaceOverItsShareWaitsForItsOwnCalls(t *testing.T) {
	h := newHarness(t, Limits{TokensPerMinute: 600}) // a bucket of 100
	a1 := h.ask("a", 60)
	h.mustGet(a1)
	a2 := h.ask("a", 60)
	h.mustWait(a2) // 40 left: a holds 60 of a share of 100, so it waits its turn as head
	b := h.ask("b", 30)
	h.mustGet(b) // a now holds more than its share of 50: b goes past it
	h.mustWait(a2)
	a1.grant.Done(60, Signal{})
	h.mustWait(a2) // a2 reserves its share, 50; 100 - 60 used - 30 held leaves 10
	h.step(3900 * time.Millisecond)
	h.mustWait(a2)
	h.step(100 * time.Millisecond)
	h.mustGet(a2)
}

func TestA429PausesEveryoneAndBacksOff(t *testing.T) {
	h := newHarness(t, Limits{})
	first := h.ask("a", 1)
	h.mustGet(first).Done(0, answer(429, "Retry-After", "5"))
	next := h.ask("b", 1)
	if got := h.e.Use().PausedUntil; !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("paused until %v, want t0+5s", got)
	}
	h.step(4999 * time.Millisecond)
	h.mustWait(next)
	h.step(time.Millisecond)
	// Without Retry-After, the second 429 in a row waits 2 s, the third 4 s, the fourth 8 s; a
	// success ends the run.
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		h.mustGet(next).Done(0, answer(429))
		next = h.ask("b", 1)
		h.step(want - time.Millisecond)
		h.mustWait(next)
		h.step(time.Millisecond)
	}
	h.mustGet(next).Done(1, answer(200))
	next = h.ask("b", 1)
	h.mustGet(next).Done(0, answer(429))
	if got := h.e.Use().PausedUntil.Sub(h.clk.Now()); got != time.Second {
		t.Fatalf("after a success, the backoff is %v, want 1s", got)
	}
	if got := h.e.Use().RateLimited; got != 5 {
		t.Fatalf("RateLimited = %d, want 5", got)
	}
}

func TestA429OfACallMadeBeforeThePauseDoesNotLengthenTheBackoff(t *testing.T) {
	h := newHarness(t, Limits{})
	a, b := h.ask("a", 1), h.ask("a", 1)
	h.mustGet(a).Done(0, answer(429))
	h.step(500 * time.Millisecond)
	h.mustGet(b).Done(0, answer(429)) // granted before a's 429: 1 s again, not 2 s
	if got := h.e.Use().PausedUntil; !got.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("paused until %v, want t0+1.5s", got.Sub(t0))
	}
}

func TestA429WaitsForTheResetOfTheLimitItExhausted(t *testing.T) {
	h := newHarness(t, Limits{})
	h.mustGet(h.ask("a", 1)).Done(0, answer(429,
		"x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "7s",
		"x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "40s"))
	if got := h.e.Use().PausedUntil; !got.Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("paused until t0+%v, want t0+7s", got.Sub(t0))
	}
}

func TestWhatTheServerSaysIsLeftLowersTheBuckets(t *testing.T) {
	h := newHarness(t, Limits{RequestsPerMinute: 600, TokensPerMinute: 6000}) // buckets of 100 and 1000
	held := h.ask("a", 100)
	h.mustGet(held)
	h.e.Observe(answer(200, "x-ratelimit-limit-tokens", "6000", "x-ratelimit-remaining-tokens", "300",
		"x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "2"))
	a, b, c := h.ask("a", 150), h.ask("a", 150), h.ask("a", 1)
	h.mustGet(a)
	h.mustGet(b)
	h.mustWait(c) // 2 requests were left
	h.e.Observe(answer(200, "x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "500"))
	h.mustWait(c) // never raised
	h.step(100 * time.Millisecond)
	h.mustGet(c)
	if u := h.e.Use(); u.Limits != (Limits{RequestsPerMinute: 600, TokensPerMinute: 6000}) {
		t.Fatalf("limits = %+v, want the configured ones", u.Limits)
	}
}

func TestNothingLeftPausesUntilTheReset(t *testing.T) {
	h := newHarness(t, Limits{})
	h.e.Observe(answer(200, "anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "0",
		"anthropic-ratelimit-requests-reset", t0.Add(3*time.Second).Format(time.RFC3339)))
	k := h.ask("a", 1)
	h.step(2999 * time.Millisecond)
	h.mustWait(k)
	h.step(time.Millisecond)
	h.mustGet(k)
}

func TestAPauseReleasesNoBurstAtItsEnd(t *testing.T) {
	// Each limit allows 10 calls a second, and a bucket of 100 calls: full at the start, and
	// full again after the 10 s pause if it refilled meanwhile. The server that asked for the
	// pause frees room from its end at its own pace, so a bucket's worth at once would mostly be
	// turned away again.
	cases := map[string]struct {
		limits  Limits
		tokens  int64
		headers []string
	}{
		"requests": {limits: Limits{RequestsPerMinute: 600}, tokens: 10,
			headers: []string{"x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "10s"}},
		"tokens": {limits: Limits{TokensPerMinute: 6000}, tokens: 10,
			headers: []string{"x-ratelimit-limit-tokens", "6000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "10s"}},
		"no headers": {limits: Limits{RequestsPerMinute: 600}, tokens: 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.limits)
			for range 300 {
				h.ask("a", tc.tokens)
			}
			// Each call ends as soon as it is granted, using what it asked for.
			done := 0
			settle := func() int {
				for got := h.order(); done < len(got); got = h.order() {
					for _, k := range got[done:] {
						done++
						if done > 1 {
							k.grant.Done(tc.tokens, answer(200))
						}
					}
				}
				return done
			}
			if got := settle(); got != 100 {
				t.Fatalf("%d granted at once, want a bucket's 100", got)
			}
			h.order()[0].grant.Done(0, answer(429, append([]string{"Retry-After", "10"}, tc.headers...)...))
			h.step(10 * time.Second)
			if got := settle() - 100; got > 1 {
				t.Fatalf("%d granted the moment the pause ended, want at most 1: the bucket filled while paused", got)
			}
			h.step(time.Second)
			if got := settle() - 100; got > 11 {
				t.Fatalf("%d granted within a second of the pause's end, want at most 11: one, then 10 a second", got)
			}
		})
	}
}

func TestTheServersLimitsLowerOrSetTheEffectiveOnes(t *testing.T) {
	cases := map[string]struct {
		configured, want Limits
	}{
		"none configured: the server's":       {Limits{MaxConcurrent: 3}, Limits{60, 9000, 3}},
		"configured above: the server's":      {Limits{600, 90000, 0}, Limits{60, 9000, 0}},
		"configured below: the configured":    {Limits{30, 1000, 0}, Limits{30, 1000, 0}},
		"configured below on one kind: mixed": {Limits{30, 90000, 0}, Limits{30, 9000, 0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.configured)
			h.e.Observe(answer(200, "x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "9000"))
			if got := h.e.Use().Limits; got != tc.want {
				t.Fatalf("limits = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTheZeroSignalSaysNothing(t *testing.T) {
	h := newHarness(t, Limits{RequestsPerMinute: 60, TokensPerMinute: 600})
	h.mustGet(h.ask("a", 50)).Done(0, Signal{})
	u := h.e.Use()
	if !u.PausedUntil.IsZero() || u.RateLimited != 0 || u.Limits != (Limits{60, 600, 0}) {
		t.Fatalf("use = %+v, want nothing learned", u)
	}
	h.mustGet(h.ask("a", 100)) // the 50 came back: the bucket is full again
}

func TestCancel(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1, TokensPerMinute: 600})
	first := h.ask("a", 60)
	big, small := h.ask("a", 45), h.ask("b", 10)
	h.mustGet(first)
	first.grant.Done(60, Signal{})
	h.mustWait(big) // waits for the 60 used to refill; small waits behind it
	h.mustWait(small)
	if !big.cancel() {
		t.Fatal("cancel of a waiter = false")
	}
	h.mustGet(small) // the head that held it back left
	if small.cancel() {
		t.Fatal("cancel after the grant = true")
	}
	h.step(time.Hour)
	if big.calls != 0 {
		t.Fatal("a cancelled waiter's ready was called")
	}
	if u := h.e.Use(); u.Waiting != 0 || len(u.WaitingByNamespace) != 0 {
		t.Fatalf("use = %+v, want no lines left", u)
	}
}

func TestRequeueGoesFirstInItsNamespace(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1})
	held := h.ask("a", 1)
	a1, a2 := h.ask("a", 1), h.ask("a", 1)
	back := h.enqueue(Ask{Namespace: "a", Run: "a/other", Tokens: 1}, true)
	h.mustGet(held).Done(0, Signal{})
	h.mustGet(back)
	h.mustWait(a1)
	back.grant.Done(0, Signal{})
	h.mustGet(a1)
	h.mustWait(a2)
}

func TestRunsOfANamespaceAreServedInTurn(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1})
	held := h.ask("a", 1)
	for range 3 {
		h.enqueue(Ask{Namespace: "a", Run: "a/busy", Tokens: 1}, false)
	}
	quiet := h.enqueue(Ask{Namespace: "a", Run: "a/quiet", Tokens: 1}, false)
	h.mustGet(held).Done(0, Signal{})
	h.order()[1].grant.Done(0, Signal{})
	h.mustGet(quiet)
}

func TestForgetReleasesWaiters(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1})
	held, waiting := h.ask("a", 1), h.ask("a", 1)
	h.p.Forget(testKey)
	if g := h.mustGet(waiting); !errors.Is(g.Err(), ErrForgotten) {
		t.Fatalf("released waiter's Err = %v", g.Err())
	}
	h.mustGet(held).Done(1, Signal{}) // changes nothing, panics nowhere
	waiting.grant.Done(1, Signal{})
	if g := h.mustGet(h.ask("a", 1)); !errors.Is(g.Err(), ErrForgotten) {
		t.Fatalf("an ask after Forget got Err = %v", g.Err())
	}
	if _, err := h.e.Acquire(context.Background(), Ask{Namespace: "a"}); !errors.Is(err, ErrForgotten) {
		t.Fatalf("Acquire after Forget = %v", err)
	}
	if _, ok := h.p.Use()[testKey]; ok {
		t.Fatal("a forgotten endpoint is still in Use")
	}
	if fresh := h.p.Endpoint(testKey, Limits{}); fresh == h.e {
		t.Fatal("Endpoint after Forget returned the forgotten one")
	}
}

func TestAcquire(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1})
	g, err := h.e.Acquire(context.Background(), Ask{Namespace: "a", Tokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error)
	go func() {
		_, err := h.e.Acquire(ctx, Ask{Namespace: "a", Tokens: 1})
		errs <- err
	}()
	for h.e.Use().Waiting == 0 {
		runtime.Gosched() // until the goroutine has queued its ask
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v", err)
	}
	g.Done(1, Signal{})
	if u := h.e.Use(); u.InFlight != 0 || u.Waiting != 0 {
		t.Fatalf("use = %+v, want nothing held", u)
	}
}

func TestNewLimitsLetWaitersThrough(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 1})
	h.ask("a", 1)
	k := h.ask("a", 1)
	h.mustWait(k)
	h.p.Endpoint(testKey, Limits{MaxConcurrent: 2})
	h.mustGet(k)
}

func TestUseCountsTheLastMinute(t *testing.T) {
	h := newHarness(t, Limits{MaxConcurrent: 2})
	a, b, c := h.ask("a", 100), h.ask("b", 50), h.ask("b", 1)
	h.mustGet(a).Done(30, answer(200))
	h.mustGet(b)
	h.mustGet(c)
	h.step(30 * time.Second)
	if u := h.e.Use(); u.RequestsLastMinute != 3 || u.TokensLastMinute != 30+50+1 || u.InFlight != 2 {
		t.Fatalf("use = %+v, want 3 requests, 81 tokens (a's used, the others' reserved), 2 in flight", u)
	}
	h.step(31 * time.Second)
	if u := h.e.Use(); u.RequestsLastMinute != 0 || u.TokensLastMinute != 0 {
		t.Fatalf("a minute on, use = %+v, want nothing counted", u)
	}
}

// plainClock is a clock without AfterFunc.
type plainClock struct{ clock.Clock }

func TestAClockWithoutAfterFuncStillWakesWaiters(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	e := New(plainClock{clk}).Endpoint(testKey, Limits{RequestsPerMinute: 6}) // a bucket of 1
	e.Enqueue(Ask{Namespace: "a"}, func(*Grant) {})
	got := make(chan *Grant, 1)
	e.Enqueue(Ask{Namespace: "a"}, func(g *Grant) { got <- g })
	for !clk.HasWaiters() {
		runtime.Gosched() // until the timer is set
	}
	clk.Step(10 * time.Second)
	if g := <-got; g.Err() != nil {
		t.Fatal(g.Err())
	}
}
