package fakes_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	testclock "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/test/fakes"
)

// The answers as clients read them: the SDK, usage, defaults, observers and memory.

func TestTheSDKReadsA429AsARateLimit(t *testing.T) {
	clock := testclock.NewFakePassiveClock(t0)
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok", Tokens: 10})
	f.Limit(fakes.RateLimits{RequestsPerMinute: 1, Clock: clock})
	client := openai.NewClient(option.WithBaseURL(f.BaseURL()), option.WithAPIKey("sk-fake"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-fake", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	_, err := client.Chat.Completions.New(t.Context(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v, want an API error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "requests" || apiErr.Code != "rate_limit_exceeded" ||
		apiErr.Response.Header.Get("x-ratelimit-remaining-requests") != "0" || apiErr.Response.Header.Get("retry-after-ms") != "60000" {
		t.Errorf("status %d, type %q, code %q, headers %v", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Response.Header)
	}
}

func TestTheSDKWaitsAsTold(t *testing.T) {
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok", Tokens: 10})
	f.Limit(fakes.RateLimits{RequestsPerMinute: 1, Window: 500 * time.Millisecond})
	client := openai.NewClient(option.WithBaseURL(f.BaseURL()), option.WithAPIKey("sk-fake"), option.WithMaxRetries(3))
	params := openai.ChatCompletionNewParams{Model: "gpt-fake", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	for range 2 {
		if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Stats(); got.OK != 2 || got.RateLimited < 1 {
		t.Errorf("stats %+v, want 2 answered after at least one 429", got)
	}
}

func TestUsageReportsCachedTokens(t *testing.T) {
	f := newFake(t)
	f.Reply(fakes.Reply{Content: "cached", Tokens: 100, PromptTokens: 80, CachedTokens: 64}, fakes.Reply{Content: "split", Tokens: 101})
	client := openai.NewClient(option.WithBaseURL(f.BaseURL()), option.WithAPIKey("sk-fake"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-fake", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	type usage struct{ Prompt, Completion, Total, Cached int64 }
	for _, want := range []usage{{80, 20, 100, 64}, {50, 51, 101, 0}} {
		resp, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		u := resp.Usage
		if diff := cmp.Diff(want, usage{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.PromptTokensDetails.CachedTokens}); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	}
}

func TestDefaultAnswersWhatNothingWasQueuedFor(t *testing.T) {
	f := newFake(t)
	if a := mustSend(t, f, chatBody("a", 4, 1)); a.status != 500 {
		t.Errorf("with nothing queued and no default: status %d", a.status)
	}
	f.Default(fakes.Reply{Content: "default"})
	content := func(a answer) string {
		choices, _ := a.body["choices"].([]any)
		if len(choices) == 0 {
			return fmt.Sprint(a.body)
		}
		return choices[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	if got := content(mustSend(t, f, chatBody("a", 4, 1))); got != "default" {
		t.Errorf("with nothing queued: %q", got)
	}
	f.ReplyTo("b", fakes.Reply{Content: "for b"})
	for agent, want := range map[string]string{"a": "default", "b": "for b"} {
		if got := content(mustSend(t, f, chatBody(agent, 4, 1))); got != want {
			t.Errorf("agent %s: %q, want %q", agent, got, want)
		}
	}
}

func TestObserversSeeEveryAnswer(t *testing.T) {
	clock := testclock.NewFakePassiveClock(t0)
	f := newFake(t)
	f.Default(fakes.Reply{Content: "ok"})
	f.Limit(fakes.RateLimits{RequestsPerMinute: 1, Clock: clock})
	var mu sync.Mutex
	var seen []fakes.Answer
	f.Observe(func(a fakes.Answer) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a)
	})
	mustSend(t, f, chatBody("a", 40, 90))
	mustSend(t, f, chatBody("a", 40, 90))
	mu.Lock()
	defer mu.Unlock()
	want := []fakes.Answer{{Status: 200, Tokens: 100}, {Status: 429, Limit: "requests", Tokens: 100}}
	ignoreTimes := cmp.FilterPath(func(p cmp.Path) bool {
		name := p.Last().String()
		return name == ".Start" || name == ".Duration"
	}, cmp.Ignore())
	if diff := cmp.Diff(want, seen, ignoreTimes); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

// heapAfter is the live heap after n requests from 16 clients.
func heapAfter(t *testing.T, f *fakes.OpenAI, client *http.Client, n int) uint64 {
	t.Helper()
	body := chatBody("a", 400, 100)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if a, err := send(t.Context(), client, f, body); err != nil || a.status != 200 {
					t.Errorf("status %d, %v", a.status, err)
					return
				}
			}
		})
	}
	wg.Wait()
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestNotRecordingKeepsMemoryFlat(t *testing.T) {
	const n = 2000
	grows := map[bool]int64{}
	for _, record := range []bool{true, false} {
		f := newFake(t)
		f.Default(fakes.Reply{Content: "ok", Tokens: 100})
		f.Record(record)
		// A short window, so that what it holds (an entry a millisecond at most) is not counted.
		f.Limit(fakes.RateLimits{Window: 10 * time.Millisecond})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		// A first round makes the connections and buffers; a second measures what requests keep.
		before := heapAfter(t, f, client, n)
		grows[record] = int64(heapAfter(t, f, client, n)) - int64(before)
		if got := len(f.Requests()); got != map[bool]int{true: 2 * n, false: 0}[record] {
			t.Errorf("record %t: %d requests kept", record, got)
		}
		client.CloseIdleConnections()
	}
	t.Logf("the heap grew %d bytes a request recording, %d not", grows[true]/n, grows[false]/n)
	if grows[true] < 400*n || grows[false] > 50*n {
		t.Errorf("the heap grew %d bytes recording %d requests and %d bytes not: want the second flat", grows[true], n, grows[false])
	}
}

// BenchmarkServe is the fake under load: 1,000 clients asking for the default reply as fast as
// it answers, with the limits off and on (high enough that every request is admitted, so the
// windows fill), and with each answer taking 100 ms, when all 1,000 wait at once.
func BenchmarkServe(b *testing.B) {
	admitAll := fakes.RateLimits{RequestsPerMinute: 100_000_000, TokensPerMinute: 1 << 60, MaxConcurrent: 10_000}
	for _, c := range []struct {
		name    string
		limits  fakes.RateLimits
		latency time.Duration
	}{
		{"no limits", fakes.RateLimits{}, 0},
		{"limits", admitAll, 0},
		{"limits and 100ms latency", admitAll, 100 * time.Millisecond},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := fakes.NewOpenAI()
			defer f.Close()
			f.Default(fakes.Reply{Content: "ok", Tokens: 100})
			f.Record(false)
			f.Limit(c.limits)
			f.Latency(c.latency)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 1000}}
			defer client.CloseIdleConnections()
			body := chatBody("a", 1000, 200)
			b.SetParallelism(max(1000/runtime.GOMAXPROCS(0), 1))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if a, err := send(context.Background(), client, f, body); err != nil || a.status != 200 {
						b.Errorf("status %d, %v", a.status, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
			b.ReportMetric(float64(f.Stats().PeakInFlight), "peak-in-flight")
		})
	}
}

func TestFillCapReportsThePromptAndAllTheRequestAllows(t *testing.T) {
	f := newFake(t)
	f.Default(fakes.Reply{Content: "long", Tokens: 10, FillCap: true})
	type usage struct{ Prompt, Completion, Total int64 }
	read := func(a answer) usage {
		u, _ := a.body["usage"].(map[string]any)
		n := func(k string) int64 { v, _ := u[k].(float64); return int64(v) }
		return usage{n("prompt_tokens"), n("completion_tokens"), n("total_tokens")}
	}
	// 400 bytes of prompt are 100 tokens as the fake estimates them.
	if diff := cmp.Diff(usage{100, 37, 137}, read(mustSend(t, f, chatBody("a", 400, 37)))); diff != "" {
		t.Errorf("with max_completion_tokens 37 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(usage{100, 5, 105}, read(mustSend(t, f, chatBody("a", 400, 0)))); diff != "" {
		t.Errorf("with no cap: Tokens' completion part (-want +got):\n%s", diff)
	}
}
