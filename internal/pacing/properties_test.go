package pacing

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// sim follows one endpoint through random asks, cancels, answers and steps of the clock, and
// checks at each step what must always hold.
type sim struct {
	*harness
	t      *rapid.T
	l      Limits
	maxAsk int64
	asks   []*taken
	// seen is how many grants were checked; inFlight the grants not yet Done.
	seen     int
	inFlight []*taken
	// pauseEnd is the least the endpoint must pause for what it was told.
	pauseEnd time.Time
}

func TestPacingProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := Limits{
			RequestsPerMinute: rapid.SampledFrom([]int64{0, 6, 60, 600}).Draw(t, "rpm"),
			TokensPerMinute:   rapid.SampledFrom([]int64{0, 600, 6000, 60000}).Draw(t, "tpm"),
			MaxConcurrent:     rapid.Int64Range(0, 6).Draw(t, "concurrent"),
		}
		s := &sim{harness: newHarness(t, l), t: t, l: l, maxAsk: 1000}
		if l.TokensPerMinute > 0 {
			// Sometimes asks larger than the bucket.
			s.maxAsk = burstOf(l.TokensPerMinute) * rapid.Int64Range(1, 3).Draw(t, "ask/burst") / 2
		}
		for range rapid.IntRange(1, 150).Draw(t, "ops") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3:
				s.enqueue()
			case 4:
				s.cancelOne()
			case 5, 6, 7:
				s.doneOne()
			default:
				s.step(time.Duration(rapid.Int64Range(0, 3000).Draw(t, "ms")) * time.Millisecond)
			}
		}
		s.drain()
		s.checkWindows()
	})
}

func (s *sim) enqueue() {
	a := Ask{
		Namespace: rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(s.t, "namespace"),
		Tokens:    rapid.Int64Range(0, s.maxAsk).Draw(s.t, "tokens"),
	}
	a.Run = a.Namespace + rapid.SampledFrom([]string{"/1", "/2"}).Draw(s.t, "run")
	front := rapid.IntRange(0, 7).Draw(s.t, "requeue") == 0
	s.asks = append(s.asks, s.harness.enqueue(a, front))
	s.sync()
}

func (s *sim) cancelOne() {
	var waiting []*taken
	for _, k := range s.asks {
		if !s.got(k) && !k.cancelled {
			waiting = append(waiting, k)
		}
	}
	if len(waiting) == 0 {
		return
	}
	k := rapid.SampledFrom(waiting).Draw(s.t, "cancel")
	k.cancelled = k.cancel()
	if !k.cancelled {
		s.t.Fatalf("cancel of a waiter not granted = false")
	}
	s.sync()
}

// doneOne ends a call in flight with a random answer.
func (s *sim) doneOne() {
	if len(s.inFlight) == 0 {
		return
	}
	i := rapid.IntRange(0, len(s.inFlight)-1).Draw(s.t, "done")
	k := s.inFlight[i]
	s.inFlight = slices.Delete(s.inFlight, i, i+1)
	k.done, k.used = true, rapid.Int64Range(0, k.grant.tokens).Draw(s.t, "used")
	now := s.clk.Now()
	var sig Signal
	switch rapid.IntRange(0, 3).Draw(s.t, "answer") {
	case 0:
		sig = answer(200)
	case 1:
		retry := time.Duration(rapid.IntRange(0, 5).Draw(s.t, "retry")) * time.Second
		sig = answer(429, "Retry-After", fmt.Sprint(int(retry.Seconds())))
		s.pauseFor(now, max(retry, time.Second))
	case 2:
		sig = s.remaining(now)
	}
	k.grant.Done(k.used, sig)
	s.sync()
}

// remaining is a success that says what is left of the limits.
func (s *sim) remaining(now time.Time) Signal {
	var kv []string
	reset := time.Duration(rapid.IntRange(0, 10).Draw(s.t, "reset")) * time.Second
	if l := s.l.RequestsPerMinute; l > 0 {
		left := rapid.Int64Range(0, l).Draw(s.t, "requests left")
		kv = append(kv, "x-ratelimit-limit-requests", fmt.Sprint(l),
			"x-ratelimit-remaining-requests", fmt.Sprint(left), "x-ratelimit-reset-requests", reset.String())
		if left == 0 {
			s.pauseFor(now, reset)
		}
	}
	if l := s.l.TokensPerMinute; l > 0 {
		left := rapid.Int64Range(0, l).Draw(s.t, "tokens left")
		kv = append(kv, "x-ratelimit-limit-tokens", fmt.Sprint(l),
			"x-ratelimit-remaining-tokens", fmt.Sprint(left), "x-ratelimit-reset-tokens", reset.String())
		if left == 0 {
			s.pauseFor(now, reset)
		}
	}
	return answer(200, kv...)
}

func (s *sim) pauseFor(now time.Time, d time.Duration) {
	if end := now.Add(d); end.After(s.pauseEnd) {
		s.pauseEnd = end
	}
}

func (s *sim) step(d time.Duration) {
	s.harness.step(d)
	s.sync()
}

// sync checks the grants made since the last sync: each of an ask not cancelled, made while not
// paused, within the concurrency bound.
func (s *sim) sync() {
	got := s.order()
	for _, k := range got[s.seen:] {
		switch {
		case k.cancelled:
			s.t.Fatalf("a cancelled ask %+v was granted", k.ask)
		case k.calls != 1:
			s.t.Fatalf("ready of %+v called %d times", k.ask, k.calls)
		case k.grant.at.Before(s.pauseEnd):
			s.t.Fatalf("granted at %v while paused until %v", k.grant.at.Sub(t0), s.pauseEnd.Sub(t0))
		}
		s.inFlight = append(s.inFlight, k)
		if m := s.l.MaxConcurrent; m > 0 && int64(len(s.inFlight)) > m {
			s.t.Fatalf("%d grants not done, max %d", len(s.inFlight), m)
		}
	}
	s.seen = len(got)
}

// drain ends every call and moves the clock on until every ask not cancelled was granted.
func (s *sim) drain() {
	for i := 0; ; i++ {
		for _, k := range s.inFlight {
			k.done, k.used = true, k.grant.tokens
			k.grant.Done(k.used, answer(200))
		}
		s.inFlight = nil
		s.sync()
		if s.e.Use().Waiting == 0 && len(s.inFlight) == 0 {
			break
		}
		if i > 10_000 {
			s.t.Fatalf("asks still waiting after %v: %+v", s.clk.Now().Sub(t0), s.e.Use())
		}
		s.step(5 * time.Second)
	}
	for _, k := range s.asks {
		if k.cancelled == (k.calls == 1) || k.calls > 1 {
			s.t.Fatalf("ask %+v: cancelled %v, ready called %d times", k.ask, k.cancelled, k.calls)
		}
	}
}

// checkWindows checks that no 60 s window saw more requests, or more tokens (used, all calls having
// ended), than the limit and the bucket; an ask larger than the bucket counts as the bucket.
func (s *sim) checkWindows() {
	granted := s.order()
	slices.SortStableFunc(granted, func(a, b *taken) int { return a.grant.at.Compare(b.grant.at) })
	for i, first := range granted {
		var requests, tokens int64
		for _, k := range granted[i:] {
			if k.grant.at.Sub(first.grant.at) > time.Minute {
				break
			}
			requests++
			tokens += k.used
		}
		if l := s.l.RequestsPerMinute; l > 0 && requests > l+burstOf(l) {
			s.t.Fatalf("%d requests in the minute from %v, limit %d", requests, first.grant.at.Sub(t0), l)
		}
		if l := s.l.TokensPerMinute; l > 0 && tokens > l+max(burstOf(l), s.maxAsk)+1 {
			s.t.Fatalf("%d tokens in the minute from %v, limit %d", tokens, first.grant.at.Sub(t0), l)
		}
	}
}
