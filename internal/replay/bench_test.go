package replay

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// BenchmarkReplay measures a replay on the config the run ran: a long run whose billing agent
// makes a tool call each step, from its export (the export read, the recording built, the run
// replayed); and a fan-out to two branch runs. Figures: docs/benchmarks.md.
func BenchmarkReplay(b *testing.B) {
	for _, steps := range []int{100, 1000} {
		b.Run(fmt.Sprintf("export of %d steps with a tool call each", steps), func(b *testing.B) {
			c := lookups().MaxHandoffs(int32(steps+10)).MaxSteps(int32(steps+10)).MaxToolCalls(int32(steps+10)).MaxTokens(int64(steps)*1000).Allow(int32(steps), "triage", "billing").
				Timeout(time.Duration(steps) * 2 * time.Second)
			p := plan(b, c)
			var answers []turn
			for i := range (steps - 2) / 2 {
				answers = append(answers, answer("triage", fmt.Sprintf("question %d", i), "billing"),
					answer("billing", fmt.Sprintf("answer %d", i), "triage"))
			}
			answers = append(answers, answer("triage", "done", "resolver"), answer("resolver", "resolved", ""))
			rec := withLookups(record(b, p, answers...), 1, false)
			e := exportOf(b, rec, c.Obj().Spec)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r := Run(p, readBack(b, e), Options{})
				if r.Replayed.Reason != v1alpha1.ReasonCompleted {
					b.Fatalf("replayed %s (%s), stopped %q", r.Replayed.Reason, r.Replayed.Message, r.Stopped)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/step")
		})
	}
	b.Run("fan-out to two branch runs", func(b *testing.B) {
		p := plan(b, research(2, v1alpha1.Join{}))
		rec := recordResearch(b, p)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if r := Run(p, rec, Options{}); !r.Same() {
				b.Fatal("not reproduced")
			}
		}
	})
}
