package stored_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/replay/stored"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// BenchmarkReplayOfALargeRun measures what the operator holds while it replays a large
// recorded run (spec.replay): a ticket whose steps each answer 512 KiB, recorded in a SQLite
// store until its transcript takes BENCH_REPLAY_BYTES (a quantity, 1Gi by default), then read
// and replayed as the operator does, each step's record read back when its turn comes. It
// reports the process's peak RSS and the Go heap's peak during the replay, beside the
// transcript's size. BENCH_REPLAY_WHOLE=1 adds the replay as it was before, every answer held
// (peak memory about the transcript's size). Figures: docs/benchmarks.md.
func BenchmarkReplayOfALargeRun(b *testing.B) {
	size := int64(1 << 30)
	if v := os.Getenv("BENCH_REPLAY_BYTES"); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			b.Fatalf("BENCH_REPLAY_BYTES: %v", err)
		}
		size = q.Value()
	}
	const answer = 512 << 10
	// Each step's record holds its answer and its input: the beginning of the answer before,
	// as much as status holds (32 KiB).
	steps := int(max(size/(answer+32<<10), 4)) &^ 1
	dir := b.TempDir()
	store := openAt(b, dir)
	p := planOf(b, helpdesk(steps))
	run, written := recordTicket(b, store, p, steps, answer)
	_ = store.Close()
	b.Run(fmt.Sprintf("%d steps, %s transcript, from the store", steps, mib(written)), func(b *testing.B) {
		measure(b, dir, run, written, func(ctx context.Context, s transcript.Store, budget *stored.Budget) (replay.Recording, error) {
			return stored.Read(ctx, s, run, noBranches, budget)
		})
	})
	if os.Getenv("BENCH_REPLAY_WHOLE") != "" {
		b.Run(fmt.Sprintf("%d steps, %s transcript, every answer held", steps, mib(written)), func(b *testing.B) {
			measure(b, dir, run, written, whole(run))
		})
	}
}

// measure replays run from the store in dir, read by read, b.N times, and reports the peak RSS
// and heap of the replays.
func measure(b *testing.B, dir string, run *v1alpha1.AgentRun, written int64, read func(context.Context, transcript.Store, *stored.Budget) (replay.Recording, error)) {
	store := openAt(b, dir)
	p := planOf(b, helpdesk(int(run.Status.StepCount)))
	runtime.GC()
	debug.FreeOSMemory()
	before := rss(b, "VmRSS")
	resetPeakRSS(b)
	heap := sampleHeap()
	b.ResetTimer()
	var budget *stored.Budget
	for range b.N {
		budget = &stored.Budget{}
		rec, err := read(context.Background(), store, budget)
		if err != nil {
			b.Fatal(err)
		}
		if r := replay.Run(p, rec, replay.Options{}); !r.Same() || r.Err != nil {
			b.Fatalf("replayed %s, diverged %d, stopped %q, err %v", r.Replayed.Reason, r.Diverged, r.Stopped, r.Err)
		}
	}
	b.StopTimer()
	peakHeap := heap()
	peak := rss(b, "VmHWM")
	b.ReportMetric(float64(written)/(1<<20), "transcript-MiB")
	if budget.Read() > 0 {
		b.ReportMetric(float64(budget.Read())/(1<<20), "read-MiB")
	}
	b.ReportMetric(float64(before)/(1<<20), "RSS-before-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
}

// whole reads run's recording as spec.replay did before: every record's whole answer held.
func whole(run *v1alpha1.AgentRun) func(context.Context, transcript.Store, *stored.Budget) (replay.Recording, error) {
	return func(ctx context.Context, s transcript.Store, _ *stored.Budget) (replay.Recording, error) {
		bld, err := replay.NewBuilder(run.Name, run.Spec, run.Status)
		if err != nil {
			return replay.Recording{}, err
		}
		kinds := []transcript.Kind{transcript.KindStep, transcript.KindDecision, transcript.KindToolTurn, transcript.KindTool}
		err = records.Each(ctx, s, transcript.Query{RunUID: string(run.UID), Kinds: kinds}, func(r transcript.Record) (bool, error) {
			return true, bld.Add(records.FromStore(r))
		})
		return bld.Recording(), err
	}
}

func openAt(b *testing.B, dir string) transcript.Store {
	s, err := sqlstore.Open(context.Background(), filepath.Join(dir, "transcript.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// rss reads a field of /proc/self/status in bytes: VmRSS now, VmHWM the peak since the last
// reset.
func rss(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), ":"); ok && name == field {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS makes VmHWM the RSS now (Linux: clear_refs 5).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// sampleHeap samples the heap's live and unswept objects every 5ms until the returned function
// is called, which returns the most seen.
func sampleHeap() func() uint64 {
	var mu sync.Mutex
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			mu.Lock()
			peak = max(peak, sample[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
