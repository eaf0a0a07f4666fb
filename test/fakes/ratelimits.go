package fakes

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// RateLimits are the limits the fake model server enforces, as OpenAI enforces an
// organization's limits for a model: requests and tokens over a sliding window, and (which
// OpenAI does not limit, but other servers do) requests served at once. A zero limit is none.
//
// Tokens are counted as OpenAI counts them against its limits, once, when a request is
// admitted: the prompt estimated at four bytes a token plus the completion the request allows
// (ChatRequest.CountedTokens). The usage a reply reports afterwards changes nothing, so a test
// knows before sending what a request costs. Only admitted requests count: a request answered
// 429 uses up nothing, and clients that retry too early are refused again, not starved.
type RateLimits struct {
	// RequestsPerMinute is how many requests the server admits within one Window.
	RequestsPerMinute int64
	// TokensPerMinute is how many tokens the requests admitted within one Window may count.
	TokensPerMinute int64
	// MaxConcurrent is how many admitted requests may be unanswered at once.
	MaxConcurrent int
	// Window is the length of the sliding window, a minute unless set: tests shorten it when
	// time must pass for the window to free.
	Window time.Duration
	// OmitHeaders leaves the x-ratelimit-* headers out, as servers that send none do.
	OmitHeaders bool
	// OmitRetryAfter leaves Retry-After and retry-after-ms out of 429 answers.
	OmitRetryAfter bool
	// Clock is the windows' clock, the real one unless set. The latency of answers is always
	// real time.
	Clock clock.PassiveClock
}

func (l RateLimits) window() time.Duration {
	if l.Window > 0 {
		return l.Window
	}
	return time.Minute
}

func (l RateLimits) clock() clock.PassiveClock {
	if l.Clock != nil {
		return l.Clock
	}
	return clock.RealClock{}
}

// Limits a refusal names, as OpenAI's error type does.
const (
	limitRequests    = "requests"
	limitTokens      = "tokens"
	limitConcurrency = "concurrency"
)

// concurrencyRetry is the wait a refusal for concurrency asks for when answers take no time:
// the server cannot know when a request in flight will be answered.
const concurrencyRetry = 10 * time.Millisecond

// limiter admits requests against RateLimits and keeps what Stats reads of them.
type limiter struct {
	mu       sync.Mutex
	limits   RateLimits
	admitted window
	inFlight int
	peak     int
	// peakRequests and peakTokens are the most any one window held.
	peakRequests int64
	peakTokens   int64
}

// admission is the limiter's decision on one request, with what the headers say.
type admission struct {
	// refused names the limit a refusal is for; empty when admitted.
	refused string
	message string
	// retry is when the request would be admitted; zero when it never would (it is larger
	// than the token limit).
	retry  time.Duration
	limits RateLimits
	// remaining and reset, of requests and of tokens, after an admitted request counted.
	remainingRequests, remainingTokens int64
	resetRequests, resetTokens         time.Duration
}

// admit decides on a request counting tokens, and counts it when admitted. busy is how long a
// refusal for concurrency asks to wait.
func (l *limiter) admit(tokens int64, busy time.Duration) admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limits
	now := lim.clock().Now()
	l.admitted.expire(now.Add(-lim.window()))
	a := admission{limits: lim}
	count, sum := l.admitted.len(), l.admitted.sum
	rpm, tpm := lim.RequestsPerMinute, lim.TokensPerMinute
	switch {
	case rpm > 0 && count >= rpm:
		a.refused, a.retry = limitRequests, l.admitted.freeFor(now, lim.window(), count+1-rpm)
		a.message = fmt.Sprintf("Rate limit reached for requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %s.",
			rpm, count, resetText(a.retry))
	case tpm > 0 && tokens > tpm:
		a.refused = limitTokens
		a.message = fmt.Sprintf("Request too large for tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.",
			tpm, tokens)
	case tpm > 0 && sum+tokens > tpm:
		a.refused, a.retry = limitTokens, l.admitted.freeTokensFor(now, lim.window(), sum+tokens-tpm)
		a.message = fmt.Sprintf("Rate limit reached for tokens per min (TPM): Limit %d, Used %d, Requested %d. Please try again in %s.",
			tpm, sum, tokens, resetText(a.retry))
	case lim.MaxConcurrent > 0 && l.inFlight >= lim.MaxConcurrent:
		a.refused, a.retry = limitConcurrency, max(busy, concurrencyRetry)
		a.message = fmt.Sprintf("Rate limit reached for concurrent requests: Limit %d, In flight %d. Please try again in %s.",
			lim.MaxConcurrent, l.inFlight, resetText(a.retry))
	default:
		l.admitted.push(now, tokens)
		count, sum = count+1, sum+tokens
		l.inFlight++
		l.peak = max(l.peak, l.inFlight)
		l.peakRequests = max(l.peakRequests, count)
		l.peakTokens = max(l.peakTokens, sum)
	}
	if !lim.OmitHeaders {
		if rpm > 0 {
			a.remainingRequests = max(rpm-count, 0)
			a.resetRequests = l.admitted.freeFor(now, lim.window(), count+1-rpm)
		}
		if tpm > 0 {
			a.remainingTokens = max(tpm-sum, 0)
			if tokens <= tpm {
				a.resetTokens = l.admitted.freeTokensFor(now, lim.window(), sum+tokens-tpm)
			}
		}
	}
	return a
}

// release marks an admitted request answered.
func (l *limiter) release() {
	l.mu.Lock()
	l.inFlight--
	l.mu.Unlock()
}

// setHeaders writes OpenAI's x-ratelimit-* headers for the limits that are set, and on a
// refusal its Retry-After.
func (a *admission) setHeaders(h http.Header) {
	if !a.limits.OmitHeaders {
		if n := a.limits.RequestsPerMinute; n > 0 {
			h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(n, 10))
			h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(a.remainingRequests, 10))
			h.Set("X-Ratelimit-Reset-Requests", resetText(a.resetRequests))
		}
		if n := a.limits.TokensPerMinute; n > 0 {
			h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(n, 10))
			h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(a.remainingTokens, 10))
			h.Set("X-Ratelimit-Reset-Tokens", resetText(a.resetTokens))
		}
	}
	if a.refused != "" && a.retry > 0 && !a.limits.OmitRetryAfter {
		h.Set("Retry-After", strconv.FormatInt(int64(ceil(a.retry, time.Second)/time.Second), 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(int64(ceil(a.retry, time.Millisecond)/time.Millisecond), 10))
	}
}

// resetText is a wait as OpenAI writes it in x-ratelimit-reset-* ("1s", "6m0s", "120ms",
// "1m30.5s"): Go's own format, rounded up to the millisecond.
func resetText(d time.Duration) string {
	return ceil(max(d, 0), time.Millisecond).String()
}

// ceil rounds d up to a multiple of unit.
func ceil(d, unit time.Duration) time.Duration {
	if r := d % unit; r != 0 {
		return d + unit - r
	}
	return d
}

// window is the requests admitted within the sliding window, oldest first, with the tokens
// they counted. Requests admitted within a millisecond of each other share an entry, stamped
// with the latest of them, so the window holds at most an entry a millisecond however fast
// requests come; the earlier ones leave it up to a millisecond late, which errs on the side of
// the limit.
type window struct {
	entries  []admitted
	head     int
	requests int64
	sum      int64
}

type admitted struct {
	at               time.Time
	requests, tokens int64
}

func (w *window) len() int64 { return w.requests }

func (w *window) push(at time.Time, tokens int64) {
	w.requests++
	w.sum += tokens
	if n := len(w.entries); n > w.head {
		if last := &w.entries[n-1]; !at.Before(last.at) && at.Sub(last.at) < time.Millisecond {
			last.at, last.requests, last.tokens = at, last.requests+1, last.tokens+tokens
			return
		}
	}
	w.entries = append(w.entries, admitted{at: at, requests: 1, tokens: tokens})
}

// expire drops the requests admitted at or before since.
func (w *window) expire(since time.Time) {
	for w.head < len(w.entries) && !w.entries[w.head].at.After(since) {
		w.requests -= w.entries[w.head].requests
		w.sum -= w.entries[w.head].tokens
		w.head++
	}
	switch {
	case w.head == len(w.entries):
		w.entries, w.head = w.entries[:0], 0
	case w.head >= 1024 && w.head*2 >= len(w.entries):
		n := copy(w.entries, w.entries[w.head:])
		w.entries, w.head = w.entries[:n], 0
	}
}

// freeFor is how long until n more requests have left the window; zero when n is not positive.
func (w *window) freeFor(now time.Time, length time.Duration, n int64) time.Duration {
	return w.freeWhen(now, length, n, func(e admitted) int64 { return e.requests })
}

// freeTokensFor is how long until requests counting at least n tokens have left the window;
// zero when n is not positive.
func (w *window) freeTokensFor(now time.Time, length time.Duration, n int64) time.Duration {
	return w.freeWhen(now, length, n, func(e admitted) int64 { return e.tokens })
}

func (w *window) freeWhen(now time.Time, length time.Duration, n int64, size func(admitted) int64) time.Duration {
	if n <= 0 {
		return 0
	}
	var freed int64
	for _, e := range w.entries[w.head:] {
		if freed += size(e); freed >= n {
			return e.at.Add(length).Sub(now)
		}
	}
	return 0
}
