package benchmark

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// liveFigures are what holding many live runs costs Baton: runs whose step waits on a slow agent.
type liveFigures struct {
	runs int
	// pickup is the time from the first create until every run was started, had its step in
	// flight, and Baton's queue was empty.
	pickup time.Duration
	// peakRSS, heap, stacks and goroutines are this process's once every run was picked up;
	// idleRSS and idleHeap (heap and stacks) before the first run was created.
	peakRSS, heap, stacks uint64
	idleRSS, idleHeap     uint64
	goroutines            int
	// cpu is this process's CPU seconds, apiCPU the API server's, from the first create until
	// every run was picked up.
	cpu, apiCPU float64
	// controller are Baton's mutating requests at the API server meanwhile.
	controller requests
}

// liveQuiet is how long Baton's queue must stay empty for the runs to count as held.
const liveQuiet = 5 * time.Second

// measureLive creates n runs whose one step takes wait, and measures Baton once it holds them
// all; then it deletes them.
func (e *env) measureLive(ctx context.Context, n int, wait time.Duration) (liveFigures, error) {
	f := liveFigures{runs: n}
	s := baton{s: e.baton}
	ns, err := newNamespace(ctx, e.c, "baton-live")
	if err != nil {
		return f, err
	}
	cfg := liveConfig(ns, wait)
	if err := e.c.Create(ctx, cfg); err != nil {
		return f, err
	}
	if err := waitObserved(ctx, e.c, cfg); err != nil {
		return f, err
	}
	e.baton.tracker.follow(ns)
	e.baton.writes.settle(ctx)
	before, err := e.before(ctx)
	if err != nil {
		return f, err
	}
	began := time.Now()
	if err := createRuns(ctx, e.c, s, ns, workload{name: "live", runs: n, steps: 1}); err != nil {
		return f, err
	}
	if f.pickup, err = e.waitHeld(ctx, n, began, wait*4/5); err != nil {
		return f, err
	}
	after, err := e.after(ctx)
	if err != nil {
		return f, err
	}
	// The figures are read at the end of the quiet period, not at its start.
	f.cpu, f.apiCPU = after.cpu-before.cpu, after.api.total("process_cpu_seconds_total", nil)-before.api.total("process_cpu_seconds_total", nil)
	all := diffRequests(before.api, after.api, "apiserver_request_total", s.group(), nil)
	self := controlPlaneWrites(all, diffRequests(before.api, after.api, "apiserver_selfrequest_total", s.group(), nil))
	f.controller = all.minus(requests{"POST " + s.resource(): all["POST "+s.resource()]}).minus(self)
	f.peakRSS, f.idleRSS, f.idleHeap = after.peakRSS, before.rss, before.heap+before.stacks
	f.heap, f.stacks, f.goroutines = after.heap, after.stacks, after.goroutines
	if err := writeHeapProfile("baton-live"); err != nil {
		fmt.Printf("could not write a heap profile: %v\n", err)
	}
	return f, cleanup(ctx, e.c, s, ns)
}

// waitHeld waits until n runs are started, each with its step in flight, and Baton's queue has
// stayed empty for liveQuiet; it returns the time from began until then.
func (e *env) waitHeld(ctx context.Context, n int, began time.Time, limit time.Duration) (time.Duration, error) {
	return quietFor(ctx, began, limit, func() (bool, string, error) {
		started, _, _ := e.baton.tracker.counts()
		m, err := local()
		if err != nil {
			return false, "", err
		}
		inFlight := m.total("baton_agent_steps_in_flight", nil)
		depth := m.total("workqueue_depth", labelsMatch{"name": "agentrun"})
		return started >= n && inFlight >= float64(n) && depth == 0,
			fmt.Sprintf("%d of %d runs started, %.0f steps in flight, %.0f runs queued", started, n, inFlight, depth), nil
	})
}

// quietFor waits until held says the runs are held and it has said so for liveQuiet; it
// returns the time from began until they first were, and fails, with what held last said, once
// limit has passed since began.
func quietFor(ctx context.Context, began time.Time, limit time.Duration, held func() (bool, string, error)) (time.Duration, error) {
	var heldSince time.Time
	for {
		ok, state, err := held()
		switch {
		case err != nil:
			return 0, err
		case !ok:
			heldSince = time.Time{}
		case heldSince.IsZero():
			heldSince = time.Now()
		case time.Since(heldSince) >= liveQuiet:
			return heldSince.Sub(began), nil
		}
		if time.Since(began) > limit {
			return 0, fmt.Errorf("after %s, %s", limit, state)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// perRun is what each of n runs adds to a figure over its idle value, in KiB.
func perRun(after, idle uint64, n int) float64 {
	if after < idle || n == 0 {
		return 0
	}
	return float64(after-idle) / 1024 / float64(n)
}

// marginal is what each run of f beyond those of fewer adds to the peak RSS over idle, in KiB.
//
// The idle figure is read just after a collection has handed the free heap back to the system,
// so the peak over it includes, besides what the runs hold, the headroom the collector lets the
// idle heap grow by (GOGC=100: as much again as is live), divided among the runs: at 1,000 runs
// about 20 KiB a run that no run holds, as a workload of runs that hold nothing shows. Both
// measurements carry that headroom, so their difference is what the added runs cost.
func marginal(fewer, f liveFigures) float64 {
	over := func(f liveFigures) float64 { return float64(f.peakRSS) - float64(f.idleRSS) }
	if f.runs <= fewer.runs {
		return 0
	}
	return (over(f) - over(fewer)) / 1024 / float64(f.runs-fewer.runs)
}

// liveReport prints the live runs' figures, of half the runs and of all of them.
func liveReport(half, f liveFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### live: %d runs held, each waiting on a slow agent (Baton only)\n\n"+
		"| runs | pickup s | idle RSS MB | peak RSS MB | RSS over idle per run KiB | Go heap in use MB | goroutine stacks MB | heap and stacks per run KiB | goroutines | process CPU s | apiserver CPU s | mutating req/run |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n", f.runs)
	for _, f := range []liveFigures{half, f} {
		fmt.Fprintf(&b, "| %d | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f | %.1f | %d | %.2f | %.2f | %.3f |\n",
			f.runs, f.pickup.Seconds(), float64(f.idleRSS)/(1<<20), float64(f.peakRSS)/(1<<20), perRun(f.peakRSS, f.idleRSS, f.runs),
			float64(f.heap)/(1<<20), float64(f.stacks)/(1<<20), perRun(f.heap+f.stacks, f.idleHeap, f.runs), f.goroutines, f.cpu, f.apiCPU,
			f.controller.total()/float64(f.runs))
	}
	fmt.Fprintf(&b, "\nWhat each run from %d to %d adds to the peak RSS: %.1f KiB. Mutating requests per run: %s\n",
		half.runs, f.runs, marginal(half, f), f.controller.format(float64(f.runs), "%.3f"))
	return b.String()
}
