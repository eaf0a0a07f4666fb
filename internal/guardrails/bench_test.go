package guardrails_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
)

// BenchmarkGuardedCall is what one guardrail adds to a call: a check of a 4 KiB tool result
// against a guardrail on loopback that allows it, through the retrying client calls use. It
// reports the p50 and p99 of a check.
func BenchmarkGuardedCall(b *testing.B) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"action":"allow"}`))
	}))
	defer s.Close()
	c := &guardrails.Client{HTTP: agents.RetryingClient(&http.Client{}, nil)}
	chain := []v1alpha1.Guardrail{{Name: "screen", URL: s.URL, Stages: []v1alpha1.GuardrailStage{v1alpha1.StageToolResult}}}
	text := string(make([]byte, 4<<10))
	req := guardrails.Request{Stage: v1alpha1.StageToolResult, Namespace: "ns", Run: "r", Agent: "a", Step: 1, Text: text}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		started := time.Now()
		if got := c.Screen(context.Background(), chain, req, nil); got.Blocked != nil {
			b.Fatalf("blocked: %s", got.Why())
		}
		took = append(took, time.Since(started))
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
