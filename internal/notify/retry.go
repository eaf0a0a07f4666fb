package notify

import (
	"net/http"
	"strconv"
	"time"
)

// Delivery is tried again on connection errors, timeouts, 408, 429 (after its Retry-After) and
// 5xx, with backoff, for up to GiveUpAfter from the event; another 4xx gives up at once.

// GiveUpAfter is how long an event is tried.
const GiveUpAfter = 24 * time.Hour

// Backoff bounds.
const (
	FirstRetry = time.Second
	MaxRetry   = 10 * time.Minute
)

// Outcome is what became of one delivery.
type Outcome int

const (
	// Sent is a delivery the sink took (2xx).
	Sent Outcome = iota
	// Retry is a delivery the sink may take later.
	Retry
	// GiveUp is a delivery the sink will never take.
	GiveUp
)

// OutcomeOf is what a delivery that answered status (0: no answer, err says why) comes to.
func OutcomeOf(status int) Outcome {
	switch {
	case status >= 200 && status < 300:
		return Sent
	case status == 0, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return Retry
	default:
		return GiveUp
	}
}

// NextTry is when delivery attempt number attempts+1 is made, after attempts failed ones, the
// last at now; retryAfter is the sink's Retry-After header, if it sent one. ok is false once the
// event, first written at since, is past GiveUpAfter.
func NextTry(since, now time.Time, attempts int, retryAfter string) (time.Time, bool) {
	wait := FirstRetry << min(max(attempts-1, 0), 20)
	wait = min(wait, MaxRetry)
	if d, ok := parseRetryAfter(retryAfter, now); ok {
		wait = max(wait, d)
	}
	next := now.Add(wait)
	if next.Sub(since) > GiveUpAfter {
		return time.Time{}, false
	}
	return next, true
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date. It is bounded by
// GiveUpAfter.
func parseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, GiveUpAfter), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), GiveUpAfter), true
	}
	return 0, false
}
