package fakes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testclock "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/test/fakes"
)

// t0 is when fake clocks start.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// answer is what the server answered one request.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// errorType is the type of the OpenAI error object of the answer, if any.
func (a answer) errorType() string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

func (a answer) errorField(name string) string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e[name].(string)
	return s
}

// chatBody is a chat completions request for agent whose prompt is prompt bytes, allowing
// completion tokens: it counts prompt/4 + completion tokens when prompt is a multiple of 4.
func chatBody(agent string, prompt int, completion int64) []byte {
	body, _ := json.Marshal(map[string]any{
		"model": "gpt-fake",
		"messages": []map[string]any{
			{"role": "system", "content": fmt.Sprintf("You are the agent %q.", agent)},
			{"role": "user", "content": strings.Repeat("x", max(prompt-len(fmt.Sprintf("You are the agent %q.", agent)), 0))},
		},
		"max_completion_tokens": completion,
	})
	return body
}

// send posts body to the fake with client and reads the answer.
func send(ctx context.Context, client *http.Client, f *fakes.OpenAI, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.BaseURL()+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		return a, fmt.Errorf("answer %q: %w", raw, err)
	}
	return a, nil
}

func mustSend(t *testing.T, f *fakes.OpenAI, body []byte) answer {
	t.Helper()
	a, err := send(t.Context(), http.DefaultClient, f, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// eventually waits until cond holds, failing the test after ten seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func newFake(t *testing.T) *fakes.OpenAI {
	f := fakes.NewOpenAI()
	t.Cleanup(f.Close)
	return f
}

func TestABurstOfTwiceTheLimitGetsTheLimitAnswered(t *testing.T) {
	const rpm = 50
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok", Tokens: 10})
	f.Limit(fakes.RateLimits{RequestsPerMinute: rpm})
	answers := make([]answer, 2*rpm)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			a, err := send(t.Context(), http.DefaultClient, f, chatBody("a", 40, 10))
			if err != nil {
				t.Error(err)
			}
			answers[i] = a
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, a := range answers {
		count[a.status]++
		if a.status != http.StatusTooManyRequests {
			continue
		}
		secs, err := strconv.Atoi(a.header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 {
			t.Errorf("Retry-After %q, want whole seconds within the window", a.header.Get("Retry-After"))
		}
		ms, err := strconv.Atoi(a.header.Get("Retry-After-Ms"))
		if err != nil || ms < 1 || ms > 60_000 || (ms+999)/1000 != secs {
			t.Errorf("retry-after-ms %q with Retry-After %d", a.header.Get("Retry-After-Ms"), secs)
		}
		if a.errorType() != "requests" || a.errorField("code") != "rate_limit_exceeded" ||
			!strings.HasPrefix(a.errorField("message"), "Rate limit reached for requests") {
			t.Errorf("429 body %v", a.body)
		}
	}
	if diff := cmp.Diff(map[int]int{http.StatusOK: rpm, http.StatusTooManyRequests: rpm}, count); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	got := f.Stats()
	if got.OK != rpm || got.RateLimited != rpm || got.PeakWindowRequests != rpm || got.InFlight != 0 {
		t.Errorf("stats %+v", got)
	}
}

// limitHeaders are the x-ratelimit-* headers and Retry-After of an answer.
type limitHeaders struct {
	Status                           int
	RemainingRequests, ResetRequests string
	RemainingTokens, ResetTokens     string
	RetryAfter, RetryAfterMs, Limits string
}

func headersOf(a answer) limitHeaders {
	return limitHeaders{
		Status:            a.status,
		RemainingRequests: a.header.Get("x-ratelimit-remaining-requests"),
		ResetRequests:     a.header.Get("x-ratelimit-reset-requests"),
		RemainingTokens:   a.header.Get("x-ratelimit-remaining-tokens"),
		ResetTokens:       a.header.Get("x-ratelimit-reset-tokens"),
		RetryAfter:        a.header.Get("retry-after"),
		RetryAfterMs:      a.header.Get("retry-after-ms"),
		Limits:            a.header.Get("x-ratelimit-limit-requests") + "/" + a.header.Get("x-ratelimit-limit-tokens"),
	}
}

func TestHeadersCountDownAndSayWhenTheWindowFrees(t *testing.T) {
	clock := testclock.NewFakePassiveClock(t0)
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok", Tokens: 10})
	f.Limit(fakes.RateLimits{RequestsPerMinute: 3, TokensPerMinute: 1000, Clock: clock})
	// Each request counts 40 bytes of prompt (10 tokens) and allows 90 more: 100 tokens.
	steps := []struct {
		at   time.Duration
		want limitHeaders
	}{
		{0, limitHeaders{Status: 200, RemainingRequests: "2", ResetRequests: "0s", RemainingTokens: "900", ResetTokens: "0s"}},
		{time.Second, limitHeaders{Status: 200, RemainingRequests: "1", ResetRequests: "0s", RemainingTokens: "800", ResetTokens: "0s"}},
		{2 * time.Second, limitHeaders{Status: 200, RemainingRequests: "0", ResetRequests: "58s", RemainingTokens: "700", ResetTokens: "0s"}},
		{2500 * time.Millisecond, limitHeaders{Status: 429, RemainingRequests: "0", ResetRequests: "57.5s", RemainingTokens: "700", ResetTokens: "0s",
			RetryAfter: "58", RetryAfterMs: "57500"}},
		// The request at 0 leaves the window at 60s; the one at 1s at 61s.
		{time.Minute, limitHeaders{Status: 200, RemainingRequests: "0", ResetRequests: "1s", RemainingTokens: "700", ResetTokens: "0s"}},
		{time.Minute + 500*time.Millisecond, limitHeaders{Status: 429, RemainingRequests: "0", ResetRequests: "500ms", RemainingTokens: "700", ResetTokens: "0s",
			RetryAfter: "1", RetryAfterMs: "500"}},
	}
	for _, s := range steps {
		clock.SetTime(t0.Add(s.at))
		got := headersOf(mustSend(t, f, chatBody("a", 40, 90)))
		s.want.Limits = "3/1000"
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("at %s (-want +got):\n%s", s.at, diff)
		}
	}
	if got := f.Stats(); got.OK != 4 || got.RateLimited != 2 || got.PeakWindowRequests != 3 || got.PeakWindowTokens != 300 {
		t.Errorf("stats %+v", got)
	}
}

func TestTokensAreCountedAsTheRequestAllows(t *testing.T) {
	clock := testclock.NewFakePassiveClock(t0)
	f := newFake(t)
	// The usage a reply reports counts for nothing against the limit.
	f.Default(fakes.Reply{Content: "ok", Tokens: 100_000})
	f.Limit(fakes.RateLimits{TokensPerMinute: 250, Clock: clock})
	steps := []struct {
		name    string
		at      time.Duration
		prompt  int
		allowed int64
		want    limitHeaders
	}{
		{"100 tokens", 0, 40, 90,
			limitHeaders{Status: 200, RemainingTokens: "150", ResetTokens: "0s"}},
		{"100 more, after which another 100 fits when the first leaves", 10 * time.Second, 40, 90,
			limitHeaders{Status: 200, RemainingTokens: "50", ResetTokens: "50s"}},
		{"100 more refused until then", 20 * time.Second, 40, 90,
			limitHeaders{Status: 429, RemainingTokens: "50", ResetTokens: "40s", RetryAfter: "40", RetryAfterMs: "40000"}},
		{"50 fit", 20 * time.Second, 40, 40,
			limitHeaders{Status: 200, RemainingTokens: "0", ResetTokens: "40s"}},
		{"more than the limit never fits", 20 * time.Second, 400, 200,
			limitHeaders{Status: 429, RemainingTokens: "0", ResetTokens: "0s"}},
		{"the first left", time.Minute, 40, 90,
			limitHeaders{Status: 200, RemainingTokens: "0", ResetTokens: "10s"}},
	}
	for _, s := range steps {
		clock.SetTime(t0.Add(s.at))
		a := mustSend(t, f, chatBody("a", s.prompt, s.allowed))
		s.want.Limits = "/250"
		if diff := cmp.Diff(s.want, headersOf(a)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
		if a.status == 429 && a.errorType() != "tokens" {
			t.Errorf("%s: error type %q, want tokens", s.name, a.errorType())
		}
	}
	if got := f.Stats().PeakWindowTokens; got != 250 {
		t.Errorf("peak tokens in a window %d, want 250", got)
	}
}

func TestResetIsWrittenAsOpenAIWritesIt(t *testing.T) {
	cases := map[string]struct {
		window, elapsed time.Duration
		want            string
	}{
		"whole seconds":                 {time.Second, 0, "1s"},
		"minutes":                       {6 * time.Minute, 0, "6m0s"},
		"milliseconds":                  {time.Second, 880 * time.Millisecond, "120ms"},
		"minutes and fractions":         {2 * time.Minute, 29500 * time.Millisecond, "1m30.5s"},
		"rounded up to the millisecond": {time.Second, 999_900 * time.Microsecond, "1ms"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			clock := testclock.NewFakePassiveClock(t0)
			f := newFake(t)
			f.Default(fakes.Reply{Content: "ok"})
			f.Limit(fakes.RateLimits{RequestsPerMinute: 1, Window: c.window, Clock: clock})
			mustSend(t, f, chatBody("a", 4, 1))
			clock.SetTime(t0.Add(c.elapsed))
			a := mustSend(t, f, chatBody("a", 4, 1))
			if got := a.header.Get("x-ratelimit-reset-requests"); a.status != 429 || got != c.want {
				t.Errorf("status %d, reset %q, want 429 and %q", a.status, got, c.want)
			}
		})
	}
}

func TestTheWindowSlides(t *testing.T) {
	clock := testclock.NewFakePassiveClock(t0)
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok", Tokens: 1})
	// No limit: the peak measures how the client paced itself.
	f.Limit(fakes.RateLimits{Clock: clock})
	for _, at := range []time.Duration{0, 50 * time.Second, 70 * time.Second} {
		clock.SetTime(t0.Add(at))
		for range 5 {
			if a := mustSend(t, f, chatBody("a", 4, 1)); a.status != 200 || len(a.header.Values("x-ratelimit-limit-requests")) != 0 {
				t.Fatalf("status %d, headers %v: want 200 with no limit headers", a.status, a.header)
			}
		}
	}
	if got := f.Stats(); got.PeakWindowRequests != 10 || got.OK != 15 {
		t.Errorf("stats %+v, want 10 requests at most in a minute, 15 in all", got)
	}
}

func TestTheWindowFreesInRealTime(t *testing.T) {
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok"})
	f.Limit(fakes.RateLimits{RequestsPerMinute: 2, Window: 500 * time.Millisecond})
	mustSend(t, f, chatBody("a", 4, 1))
	mustSend(t, f, chatBody("a", 4, 1))
	refused := mustSend(t, f, chatBody("a", 4, 1))
	wait, err := time.ParseDuration(refused.header.Get("x-ratelimit-reset-requests"))
	if refused.status != 429 || err != nil || wait <= 0 || wait > 500*time.Millisecond {
		t.Fatalf("status %d, reset %q: want 429 and a wait within the window", refused.status, refused.header.Get("x-ratelimit-reset-requests"))
	}
	time.Sleep(wait)
	if a := mustSend(t, f, chatBody("a", 4, 1)); a.status != 200 {
		t.Errorf("after the reset, status %d", a.status)
	}
}

func TestConcurrentRequestsAreCapped(t *testing.T) {
	f := newFake(t)
	f.Limit(fakes.RateLimits{MaxConcurrent: 2})
	f.Reply(fakes.Reply{Hang: true}, fakes.Reply{Hang: true}, fakes.Reply{Content: "ok"})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = send(ctx, http.DefaultClient, f, chatBody("a", 4, 1)) })
	}
	eventually(t, "two requests are in flight", func() bool { return f.Stats().InFlight == 2 })
	a := mustSend(t, f, chatBody("a", 4, 1))
	if a.status != 429 || a.errorType() != "concurrency" || a.header.Get("Retry-After") != "1" || a.header.Get("Retry-After-Ms") == "" {
		t.Errorf("a third request: status %d, body %v, headers %v", a.status, a.body, a.header)
	}
	cancel()
	wg.Wait()
	eventually(t, "no request is in flight", func() bool { return f.Stats().InFlight == 0 })
	if a := mustSend(t, f, chatBody("a", 4, 1)); a.status != 200 {
		t.Errorf("once the others were answered: status %d, body %v", a.status, a.body)
	}
	if got := f.Stats(); got.PeakInFlight != 2 || got.RateLimited != 1 || got.OK != 1 {
		t.Errorf("stats %+v", got)
	}
}

func TestLatencyHoldsNoLock(t *testing.T) {
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok"})
	f.Latency(time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _ = send(ctx, http.DefaultClient, f, chatBody("a", 4, 1)) })
	}
	eventually(t, "all twenty wait at once", func() bool { return f.Stats().InFlight == 20 })
	cancel()
	wg.Wait()
	eventually(t, "the waits end with their clients", func() bool { return f.Stats().InFlight == 0 })
	if got := f.Stats(); got.OK != 0 || got.PeakInFlight != 20 {
		t.Errorf("stats %+v", got)
	}
}

func TestSwitchesLeaveHeadersOut(t *testing.T) {
	cases := map[string]struct {
		limits                 fakes.RateLimits
		limitHeaders, retryFor bool
	}{
		"everything":     {fakes.RateLimits{}, true, true},
		"no x-ratelimit": {fakes.RateLimits{OmitHeaders: true}, false, true},
		"no Retry-After": {fakes.RateLimits{OmitRetryAfter: true}, true, false},
		"neither":        {fakes.RateLimits{OmitHeaders: true, OmitRetryAfter: true}, false, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			f.Default(fakes.Reply{Content: "ok"})
			c.limits.RequestsPerMinute, c.limits.TokensPerMinute = 1, 100
			f.Limit(c.limits)
			for _, a := range []answer{mustSend(t, f, chatBody("a", 4, 1)), mustSend(t, f, chatBody("a", 4, 1))} {
				for _, h := range []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
					"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"} {
					if got := a.header.Get(h) != ""; got != c.limitHeaders {
						t.Errorf("status %d: %s present %t", a.status, h, got)
					}
				}
				for _, h := range []string{"Retry-After", "Retry-After-Ms"} {
					if got := a.header.Get(h) != ""; got != (c.retryFor && a.status == 429) {
						t.Errorf("status %d: %s present %t", a.status, h, got)
					}
				}
			}
		})
	}
}
