package pacing

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxCount bounds the counts read from a server or given in an ask; anything above is taken for
// garbage. It is far above any provider's per-minute limit.
const maxCount = 1_000_000_000_000

// The headers ReadSignal reads, OpenAI's first: a server sends one set or the other.
var (
	limitRequests     = []string{"x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"}
	remainingRequests = []string{"x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining"}
	resetRequests     = []string{"x-ratelimit-reset-requests", "anthropic-ratelimit-requests-reset"}
	limitTokens       = []string{"x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit"}
	remainingTokens   = []string{"x-ratelimit-remaining-tokens", "anthropic-ratelimit-tokens-remaining"}
	resetTokens       = []string{"x-ratelimit-reset-tokens", "anthropic-ratelimit-tokens-reset"}
)

// Signal is what a server's answer says of its limits. The zero Signal says nothing (a call never
// made); ReadSignal(status, nil, now) is an answer without rate-limit headers.
type Signal struct {
	// Status is the answer's HTTP status; 0 when there was no answer. A 2xx ends a run of 429s.
	Status int
	// RateLimited is set for a 429.
	RateLimited bool
	// RetryAfter is how long the server asked everyone to wait; 0 when it did not say.
	RetryAfter time.Duration
	// LimitRequests and LimitTokens are the server's per-minute limits; RemainingRequests and
	// RemainingTokens what is left of them. Each is -1 when absent. A Remaining counts only beside
	// a Limit that is not 0, which is how the zero Signal says nothing.
	LimitRequests, RemainingRequests, LimitTokens, RemainingTokens int64
	// ResetRequests and ResetTokens are how long until the limit is whole again; 0 when absent.
	ResetRequests, ResetTokens time.Duration
}

// ReadSignal reads what an answer's status and headers say of the server's limits, at now. It
// reads OpenAI's headers (x-ratelimit-{limit,remaining,reset}-{requests,tokens}, resets as Go
// durations like "6m0s" or "20ms"; retry-after-ms) and Anthropic's
// (anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}, resets as RFC 3339 times), and
// Retry-After (seconds or an HTTP date). A value that is negative, unparsable, a wait above a day
// or a count above any real limit is read as absent; a limit of 0 too, and a remaining count above
// its limit is read as the limit.
func ReadSignal(status int, h http.Header, now time.Time) Signal {
	s := Signal{
		Status:            status,
		RateLimited:       status == http.StatusTooManyRequests,
		RetryAfter:        retryAfter(h, now),
		LimitRequests:     readCount(h, limitRequests),
		RemainingRequests: readCount(h, remainingRequests),
		ResetRequests:     readReset(h, resetRequests, now),
		LimitTokens:       readCount(h, limitTokens),
		RemainingTokens:   readCount(h, remainingTokens),
		ResetTokens:       readReset(h, resetTokens, now),
	}
	if s.LimitRequests == 0 {
		s.LimitRequests = -1
	}
	if s.LimitTokens == 0 {
		s.LimitTokens = -1
	}
	if s.LimitRequests > 0 {
		s.RemainingRequests = min(s.RemainingRequests, s.LimitRequests)
	}
	if s.LimitTokens > 0 {
		s.RemainingTokens = min(s.RemainingTokens, s.LimitTokens)
	}
	return s
}

// first is the first of names present in h, trimmed.
func first(h http.Header, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// readCount is the count under the first of names present, or -1.
func readCount(h http.Header, names []string) int64 {
	n, err := strconv.ParseInt(first(h, names), 10, 64)
	if err != nil || n < 0 || n > maxCount {
		return -1
	}
	return n
}

// readReset is the wait under the first of names present: a duration ("1m30.5s"), a number of
// seconds, or an RFC 3339 time; 0 when absent or out of bounds.
func readReset(h http.Header, names []string, now time.Time) time.Duration {
	v := first(h, names)
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil {
		return bounded(d)
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return seconds(secs)
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return bounded(t.Sub(now))
	}
	return 0
}

// retryAfter is retry-after-ms, else Retry-After (integer seconds or an HTTP date); 0 when absent
// or out of bounds.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := first(h, []string{"retry-after-ms"}); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return seconds(ms / 1000)
		}
	}
	v := first(h, []string{"Retry-After"})
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 || secs > int64(maxWait/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return bounded(t.Sub(now))
	}
	return 0
}

// seconds is a number of seconds as a wait, 0 when out of bounds.
func seconds(secs float64) time.Duration {
	if math.IsNaN(secs) || secs < 0 || secs > maxWait.Seconds() {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// bounded is d, or 0 when it is negative or above a day.
func bounded(d time.Duration) time.Duration {
	if d < 0 || d > maxWait {
		return 0
	}
	return d
}
