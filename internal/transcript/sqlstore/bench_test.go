package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// BenchmarkAppendStep writes step records as the operator does, one per step with a 2 KiB
// output, from 8 writers at once (steps of different runs end together), and reports the
// latency of a write: p50 and p99.
func BenchmarkAppendStep(b *testing.B) {
	body, _ := json.Marshal(map[string]any{"agent": "worker", "input": strings.Repeat("i", 1024), "output": strings.Repeat("o", 2048), "tokens": 300})
	stores := map[string]func(b *testing.B) transcript.Store{
		"sqlite": func(b *testing.B) transcript.Store {
			s, err := sqlstore.Open(context.Background(), filepath.Join(b.TempDir(), "t.db"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) transcript.Store {
			dsn, err := postgres.Database(context.Background(), fmt.Sprintf("bench_%d", time.Now().UnixNano()))
			if err != nil {
				b.Fatal(err)
			}
			s, err := sqlstore.Open(context.Background(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s := stores[name](b)
			defer s.Close()
			const writers = 8
			latencies := make([][]time.Duration, writers)
			b.ResetTimer()
			done := make(chan struct{})
			for w := range writers {
				go func() {
					defer func() { done <- struct{}{} }()
					for i := w; i < b.N; i += writers {
						rec := transcript.Record{Key: transcript.Key{Kind: transcript.KindStep, Step: int32(i%1000 + 1)},
							RunUID: fmt.Sprintf("run-%d", i/1000*writers+w), Namespace: "ns", Run: "r", Time: time.Now(), Body: body}
						began := time.Now()
						if _, err := s.Append(context.Background(), rec); err != nil {
							b.Error(err)
							return
						}
						latencies[w] = append(latencies[w], time.Since(began))
					}
				}()
			}
			for range writers {
				<-done
			}
			b.StopTimer()
			all := slices.Concat(latencies...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
