package pacing

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// absent is a Signal with every count absent, for status.
func absent(status int) Signal {
	return Signal{
		Status: status, RateLimited: status == http.StatusTooManyRequests,
		LimitRequests: -1, RemainingRequests: -1, LimitTokens: -1, RemainingTokens: -1,
	}
}

func with(s Signal, f func(*Signal)) Signal {
	f(&s)
	return s
}

// readSignalCases are answers, as a status and header name/value pairs, and what they say.
var readSignalCases = map[string]struct {
	status  int
	headers []string
	want    Signal
}{
	"an answer without headers says nothing of the limits": {
		status: 200,
		want:   absent(200),
	},
	"OpenAI's headers": {
		status: 200,
		headers: []string{
			"x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499",
			"x-ratelimit-reset-requests", "120ms",
			"x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "29000",
			"x-ratelimit-reset-tokens", "6m0s",
		},
		want: with(absent(200), func(s *Signal) {
			s.LimitRequests, s.RemainingRequests, s.ResetRequests = 500, 499, 120*time.Millisecond
			s.LimitTokens, s.RemainingTokens, s.ResetTokens = 30000, 29000, 6*time.Minute
		}),
	},
	"OpenAI's resets with fractions and units": {
		status:  200,
		headers: []string{"x-ratelimit-reset-requests", "1m30.5s", "x-ratelimit-reset-tokens", "20ms"},
		want: with(absent(200), func(s *Signal) {
			s.ResetRequests, s.ResetTokens = 90500*time.Millisecond, 20*time.Millisecond
		}),
	},
	"a 429 with retry-after-ms": {
		status:  429,
		headers: []string{"retry-after-ms", "1500"},
		want:    with(absent(429), func(s *Signal) { s.RetryAfter = 1500 * time.Millisecond }),
	},
	"retry-after-ms is read before Retry-After": {
		status:  429,
		headers: []string{"retry-after-ms", "250", "Retry-After", "7"},
		want:    with(absent(429), func(s *Signal) { s.RetryAfter = 250 * time.Millisecond }),
	},
	"Retry-After in seconds": {
		status:  429,
		headers: []string{"Retry-After", "20"},
		want:    with(absent(429), func(s *Signal) { s.RetryAfter = 20 * time.Second }),
	},
	"Retry-After as an HTTP date": {
		status:  503,
		headers: []string{"Retry-After", t0.Add(30 * time.Second).Format(http.TimeFormat)},
		want:    with(absent(503), func(s *Signal) { s.RetryAfter = 30 * time.Second }),
	},
	"Retry-After as a date already past": {
		status:  429,
		headers: []string{"Retry-After", t0.Add(-time.Minute).Format(http.TimeFormat)},
		want:    absent(429),
	},
	"Anthropic's headers": {
		status: 200,
		headers: []string{
			"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", t0.Add(10 * time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-tokens-limit", "40000", "anthropic-ratelimit-tokens-remaining", "39000",
			"anthropic-ratelimit-tokens-reset", t0.Add(2 * time.Second).Format(time.RFC3339),
		},
		want: with(absent(200), func(s *Signal) {
			s.LimitRequests, s.RemainingRequests, s.ResetRequests = 50, 0, 10*time.Second
			s.LimitTokens, s.RemainingTokens, s.ResetTokens = 40000, 39000, 2*time.Second
		}),
	},
	"a reset in plain seconds": {
		status:  200,
		headers: []string{"x-ratelimit-reset-tokens", "2.5"},
		want:    with(absent(200), func(s *Signal) { s.ResetTokens = 2500 * time.Millisecond }),
	},
	"garbage is absent": {
		status: 429,
		headers: []string{
			"x-ratelimit-limit-requests", "lots", "x-ratelimit-remaining-requests", "-5",
			"x-ratelimit-reset-requests", "soon", "x-ratelimit-limit-tokens", "1e5",
			"x-ratelimit-remaining-tokens", "12.5", "x-ratelimit-reset-tokens", "-1s",
			"retry-after-ms", "NaN", "Retry-After", "tomorrow",
		},
		want: absent(429),
	},
	"absurd values are absent": {
		status: 429,
		headers: []string{
			"x-ratelimit-limit-requests", "99999999999999999", "x-ratelimit-reset-requests", "48h",
			"anthropic-ratelimit-tokens-reset", "2100-01-01T00:00:00Z",
			"retry-after-ms", "1e12", "Retry-After", "999999",
		},
		want: absent(429),
	},
	"a limit of 0 is absent, and its remaining stands alone": {
		status:  200,
		headers: []string{"x-ratelimit-limit-tokens", "0", "x-ratelimit-remaining-tokens", "0"},
		want:    with(absent(200), func(s *Signal) { s.RemainingTokens = 0 }),
	},
	"a remaining count above its limit is the limit": {
		status:  200,
		headers: []string{"x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "99"},
		want: with(absent(200), func(s *Signal) {
			s.LimitRequests, s.RemainingRequests = 10, 10
		}),
	},
	"OpenAI's headers are read before Anthropic's": {
		status: 200,
		headers: []string{
			"x-ratelimit-limit-requests", "500", "anthropic-ratelimit-requests-limit", "50",
		},
		want: with(absent(200), func(s *Signal) { s.LimitRequests = 500 }),
	},
}

func TestReadSignal(t *testing.T) {
	for name, tc := range readSignalCases {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				h.Add(tc.headers[i], tc.headers[i+1])
			}
			if diff := cmp.Diff(tc.want, ReadSignal(tc.status, h, t0)); diff != "" {
				t.Errorf("ReadSignal (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzReadSignal(f *testing.F) {
	f.Add(429, "1m30.5s", "500", "499", "2030-01-02T03:04:15Z", "20", "1500")
	f.Add(200, "-1s", "-3", "lots", "Mon, 02 Jan 2030 03:04:35 GMT", "1e400", "NaN")
	f.Fuzz(func(t *testing.T, status int, reset, limit, remaining, stamp, retry, retryMS string) {
		h := http.Header{}
		h.Set("x-ratelimit-reset-requests", reset)
		h.Set("x-ratelimit-limit-requests", limit)
		h.Set("x-ratelimit-remaining-requests", remaining)
		h.Set("anthropic-ratelimit-tokens-reset", stamp)
		h.Set("anthropic-ratelimit-tokens-limit", limit)
		h.Set("anthropic-ratelimit-tokens-remaining", remaining)
		h.Set("Retry-After", retry)
		h.Set("retry-after-ms", retryMS)
		s := ReadSignal(status, h, t0)
		for _, d := range []time.Duration{s.RetryAfter, s.ResetRequests, s.ResetTokens} {
			if d < 0 || d > maxWait {
				t.Errorf("wait %v out of bounds in %+v", d, s)
			}
		}
		for _, n := range []int64{s.LimitRequests, s.RemainingRequests, s.LimitTokens, s.RemainingTokens} {
			if n < -1 || n > maxCount {
				t.Errorf("count %d out of bounds in %+v", n, s)
			}
		}
		if s.LimitRequests == 0 || s.LimitTokens == 0 {
			t.Errorf("a limit of 0 read as present in %+v", s)
		}
		if s.LimitTokens > 0 && s.RemainingTokens > s.LimitTokens {
			t.Errorf("remaining above the limit in %+v", s)
		}
	})
}
