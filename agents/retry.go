package agents

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/baton-dev/baton/internal/egress"
)

// Retry policy for model servers and HTTP agents: transient failures (429, 5xx, a connection
// that failed) are tried again after about 1 s, then 2 s, doubling up to 30 s, 3 attempts in
// all, honouring the server's retry-after-ms or Retry-After (up to 30 s); everything inside the
// step's deadline. Other answers (400, 401, 403, 404, ...) are final. Each pause of the backoff
// is drawn from [d, 1.5d), so that hundreds of steps turned away together do not come back
// together.
const (
	retryAttempts = 3
	retryFirst    = time.Second
	retryCap      = 30 * time.Second
)

// RetryTransport retries transient failures of an HTTP round trip, as the policy above says.
type RetryTransport struct {
	next  http.RoundTripper
	clock clock.Clock
}

// NewRetryTransport wraps next (nil: http.DefaultTransport).
func NewRetryTransport(next http.RoundTripper, clk clock.Clock) *RetryTransport {
	if next == nil {
		next = http.DefaultTransport
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &RetryTransport{next: next, clock: clk}
}

// noRetries marks a context whose requests are sent once.
type noRetries struct{}

// SendOnce marks requests made with the context as not to be retried: calls of tools with side
// effects, which a server may have acted on even when it answered 5xx.
func SendOnce(ctx context.Context) context.Context { return context.WithValue(ctx, noRetries{}, true) }

// RoundTrip sends the request, and again after a transient failure.
func (t *RetryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if ctx.Value(noRetries{}) != nil {
		return t.next.RoundTrip(req)
	}
	backoff := retryBackoff()
	for attempt := 1; ; attempt++ {
		if attempt > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
		resp, err := t.next.RoundTrip(req)
		if attempt >= retryAttempts || !transient(ctx, resp, err) || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		pause := backoff.Step()
		if after, ok := retryAfter(resp, t.clock.Now()); ok {
			pause = min(after, retryCap)
		}
		if deadline, ok := ctx.Deadline(); ok && t.clock.Now().Add(pause).After(deadline) {
			// No time left for another attempt: this answer is the answer.
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		timer := t.clock.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C():
		}
	}
}

func transient(ctx context.Context, resp *http.Response, err error) bool {
	if err != nil {
		// A call the egress policy refuses is refused again.
		return ctx.Err() == nil && !egress.IsRefused(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		// A paced call goes again when its endpoint's pacer says so, not before.
		return pacedAnswers(ctx) == nil
	}
	return resp.StatusCode >= 500
}

// retryBackoff is the policy's backoff, with its jitter.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: retryFirst, Factor: 2, Jitter: 0.5, Steps: retryAttempts, Cap: retryCap}
}

// retryAfter reads how long the server asks to wait: retry-after-ms (milliseconds, as OpenAI
// sends it), else Retry-After (seconds, or an HTTP date).
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	if ms, err := strconv.ParseFloat(resp.Header.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 && ms <= float64(time.Hour/time.Millisecond) {
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}
