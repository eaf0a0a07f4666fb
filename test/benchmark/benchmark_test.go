package benchmark

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// settings are the benchmark's environment variables.
type settings struct {
	reps, scale int
	only        map[string]bool
}

func readSettings() (settings, error) {
	s := settings{reps: 3, scale: 1}
	for _, v := range []struct {
		name string
		to   *int
	}{{"BENCH_REPS", &s.reps}, {"BENCH_SCALE", &s.scale}} {
		if raw := os.Getenv(v.name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 {
				return s, fmt.Errorf("%s=%q: want a whole number from 1", v.name, raw)
			}
			*v.to = n
		}
	}
	if raw := os.Getenv("BENCH_ONLY"); raw != "" {
		s.only = map[string]bool{}
		for _, name := range strings.Split(raw, ",") {
			s.only[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	return s, nil
}

func (s settings) wants(name string) bool { return s.only == nil || s.only[strings.ToLower(name)] }

// settingsFor is the settings of the benchmark of that name, which it skips when BENCH_ONLY
// leaves it out.
func settingsFor(b *testing.B, name string) settings {
	b.Helper()
	s, err := readSettings()
	if err != nil {
		b.Fatal(err)
	}
	if !s.wants(name) {
		b.Skip("BENCH_ONLY leaves out " + name)
	}
	return s
}

// shared is the one control plane and pair of controllers of this process, started by the first
// benchmark that needs it and stopped by TestMain.
var shared struct {
	once sync.Once
	e    *env
	dir  string
	err  error
}

func sharedEnv(b *testing.B) *env {
	b.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "baton-bench-"); shared.err != nil {
			return
		}
		shared.e, shared.err = startEnv(shared.dir)
	})
	if shared.err != nil {
		b.Fatal(shared.err)
	}
	return shared.e
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.e != nil {
		shared.e.stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// BenchmarkWorkloads runs each workload on the baseline and on Baton, BENCH_REPS times, and
// prints a table per workload.
func BenchmarkWorkloads(b *testing.B) {
	s, err := readSettings()
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range workloads(s.scale) {
		if !s.wants(w.name) {
			continue
		}
		b.Run(w.name, func(b *testing.B) { benchWorkload(b, sharedEnv(b), w, s.reps) })
	}
}

func benchWorkload(b *testing.B, e *env, w workload, reps int) {
	ctx := context.Background()
	var results []pair
	for rep := range reps {
		var p pair
		// Alternate who goes first, so that neither always meets a fresher API server.
		order := []subject{baseline{s: e.base}, baton{s: e.baton}}
		if rep%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			profile := ""
			if w.profile && rep == 0 {
				profile = s.name() + "-" + strings.ToLower(w.name)
			}
			m, err := e.measure(ctx, s, w, profile)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Println(raw(rep+1, s.name(), m))
			for _, c := range checks(s, w, m) {
				fmt.Println("CHECK FAILED:", c)
			}
			if s.name() == "baton" {
				p.baton = m
			} else {
				p.base = m
			}
		}
		results = append(results, p)
	}
	fmt.Print(table(w, results))
	b.ReportMetric(ratioOf(results, columnNamed("handoffs/s")), "handoffs/s-ratio")
	b.ReportMetric(ratioOf(results, columnNamed("wall s")), "wall-ratio")
	b.ReportMetric(ratioOf(results, columnNamed("apiserver CPU ms/handoff")), "apiserver-cpu-ratio")
	b.ReportMetric(medianOf(results, columnNamed("mutating req/handoff"), true), "baton-mutating/handoff")
	b.ReportMetric(medianOf(results, columnNamed("mutating req/handoff"), false), "baseline-mutating/handoff")
	b.ReportMetric(medianOf(results, columnNamed("409s"), true), "baton-409s")
	b.ReportMetric(medianOf(results, columnNamed("reconcile p99 ms"), true), "baton-p99-ms")
}

// liveRuns is how many live runs Baton holds, divided by BENCH_SCALE.
const liveRuns = 10000

// liveWait is how long each live run's step takes: longer than the measurement.
const liveWait = 10 * time.Minute

// BenchmarkLiveRuns has Baton hold many runs whose step waits on a slow agent, and reports its
// memory and CPU once it holds them all. It holds half as many first: what the second half of
// the runs adds to the peak is the memory a live run costs (see marginal).
func BenchmarkLiveRuns(b *testing.B) {
	s := settingsFor(b, "live")
	e := sharedEnv(b)
	n := max(liveRuns/s.scale, 2)
	half, err := e.measureLive(context.Background(), n/2, liveWait)
	if err != nil {
		b.Fatal(err)
	}
	f, err := e.measureLive(context.Background(), n, liveWait)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Print(liveReport(half, f))
	b.ReportMetric(float64(f.peakRSS)/(1<<20), "peak-RSS-MB")
	b.ReportMetric(perRun(f.peakRSS, f.idleRSS, f.runs), "RSS-KiB/run")
	b.ReportMetric(marginal(half, f), "marginal-RSS-KiB/run")
	b.ReportMetric(f.cpu, "cpu-s")
	b.ReportMetric(float64(f.goroutines), "goroutines")
}

// restartRuns is how many live runs the restart's operator holds, divided by BENCH_SCALE.
const restartRuns = 10000

// BenchmarkRestart kills the operator binary while it holds many live runs and starts it again,
// and reports how long until every run progresses again and both processes' peak RSS
// (restart.go).
func BenchmarkRestart(b *testing.B) {
	s := settingsFor(b, "restart")
	f, err := measureRestart(context.Background(), max(restartRuns/s.scale, 2), liveWait)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Print(restartReport(f))
	b.ReportMetric(f.restart.Seconds(), "restart-s")
	b.ReportMetric(float64(f.peakAfter)/float64(max(f.peakBefore, 1)), "peak-RSS-after/before")
}

// BenchmarkOverload has Baton run many runs from many namespaces on one model endpoint whose
// server allows fewer calls than they want, and reports its goodput, the 429s, the runs that
// failed, fairness among the namespaces, memory and drain time against their targets
// (overload.go). It is Baton's alone: the baseline has no model calls to pace.
func BenchmarkOverload(b *testing.B) {
	s := settingsFor(b, "overload")
	f, err := sharedEnv(b).measureOverload(context.Background(), overloadAt(s.scale))
	if err != nil {
		b.Fatal(err)
	}
	report, misses := overloadReport(f)
	fmt.Print(report)
	for _, m := range misses {
		fmt.Println("TARGET MISSED:", m)
	}
	if failed := f.o.runs - f.reasons[string(v1alpha1.ReasonCompleted)]; failed > 0 {
		b.Errorf("%d of %d runs did not complete: %v", failed, f.o.runs, f.reasons)
	}
	b.ReportMetric(f.goodput, "goodput/R")
	b.ReportMetric(1000*float64(f.limited)/float64(max(f.ok, 1)), "429s/1000-calls")
	b.ReportMetric(mean(f.fair.jain), "jain")
	b.ReportMetric(float64(f.peakRSS)/(1<<20), "peak-RSS-MB")
	b.ReportMetric(f.drain.Seconds()/f.o.ideal().Seconds(), "drain/ideal")
}

// BenchmarkBudget has Baton run many runs with a budget in money on a priced endpoint, and fails
// if any run spent past its budget (budget.go).
func BenchmarkBudget(b *testing.B) {
	s := settingsFor(b, "budget")
	f, err := sharedEnv(b).measureBudget(context.Background(), max(budgetRuns/s.scale, len(budgets)))
	if err != nil {
		b.Fatal(err)
	}
	fmt.Print(budgetReport(f))
	if len(f.over) > 0 {
		b.Errorf("%d runs spent past their maxCost", len(f.over))
	}
	b.ReportMetric(f.worst.InexactFloat64(), "max-cost/maxCost")
}

// BenchmarkQuotaRace has Baton run many runs of one namespace racing on one day's cost cap, and
// reports how far past the cap the namespace spent (quota.go).
func BenchmarkQuotaRace(b *testing.B) {
	s := settingsFor(b, "quota")
	f, err := sharedEnv(b).measureQuotaRace(context.Background(), max(quotaRaceRuns/s.scale, 10))
	if err != nil {
		b.Fatal(err)
	}
	fmt.Print(quotaReport(f))
	if f.held == 0 {
		b.Error("no run was held at the cap: the race did not reach it")
	}
	_, share := f.over()
	b.ReportMetric(share.InexactFloat64(), "over/cap")
}

// BenchmarkFanOut has Baton run parents that fan out to branch runs and join them, and reports
// the wall time against the ideal, the mutating requests per step and the join's latency
// (branches.go). It is Baton's alone: the baseline has no branches.
func BenchmarkFanOut(b *testing.B) {
	s := settingsFor(b, "fanout")
	var figs []fanOutFigures
	for _, f := range fanOutWorkloads(s.scale) {
		fig, err := sharedEnv(b).measureFanOut(context.Background(), f)
		if err != nil {
			b.Fatal(err)
		}
		figs = append(figs, fig)
		b.ReportMetric(fig.wall.Seconds(), f.name+"-wall-s")
		b.ReportMetric(fig.controller.total()/float64(f.steps()), f.name+"-mutating/step")
		b.ReportMetric(float64(percentile(fig.joins, 0.99).Milliseconds()), f.name+"-join-p99-ms")
	}
	fmt.Print(fanOutReport(figs))
}

// BenchmarkStatusWriteCost measures what one status write costs the API server by the shape of
// the status written (writecost.go), on a control plane of its own, BENCH_REPS rounds.
func BenchmarkStatusWriteCost(b *testing.B) {
	s := settingsFor(b, "writecost")
	costs, err := measureWriteCosts(context.Background(), s.reps)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Print(writeCostReport(costs))
	base := median(costs[0].cpuPerWrite)
	for _, c := range costs[1:] {
		b.ReportMetric(median(c.cpuPerWrite)/base, strings.ReplaceAll(strings.ReplaceAll(c.shape, ",", ""), " ", "-")+"/baseline")
	}
}
