package agents

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterReadsWhatTheServerAsks(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		"milliseconds, as OpenAI sends them": {map[string]string{"Retry-After-Ms": "1500"}, 1500 * time.Millisecond, true},
		"milliseconds win over seconds":      {map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		"seconds":                            {map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		"an HTTP date":                       {map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second, true},
		"unreadable milliseconds fall back":  {map[string]string{"Retry-After-Ms": "soon", "Retry-After": "1"}, time.Second, true},
		"nothing":                            {map[string]string{}, 0, false},
	}
	for name, tc := range cases {
		resp := &http.Response{Header: http.Header{}}
		for k, v := range tc.header {
			resp.Header.Set(k, v)
		}
		got, ok := retryAfter(resp, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v %v, want %v %v", name, got, ok, tc.want, tc.ok)
		}
	}
}

// Steps turned away together must not come back together: the pauses are spread.
func TestRetryPausesAreSpread(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		b := retryBackoff()
		first, second := b.Step(), b.Step()
		if first < time.Second || first >= 1500*time.Millisecond || second < 2*time.Second || second >= 3*time.Second {
			t.Fatalf("pauses %v then %v, want [1s, 1.5s) then [2s, 3s)", first, second)
		}
		seen[first.Round(10*time.Millisecond)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 first pauses took only %d distinct values", len(seen))
	}
}

func TestSendOnceIsNotRetried(t *testing.T) {
	calls := 0
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		calls++
		return &http.Response{StatusCode: http.StatusBadGateway, Body: http.NoBody}, nil
	})
	req, _ := http.NewRequestWithContext(SendOnce(context.Background()), http.MethodPost, "http://tool.invalid/call", http.NoBody)
	resp, err := NewRetryTransport(next, nil).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || calls != 1 {
		t.Fatalf("status %d, %d calls; want one call", resp.StatusCode, calls)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
