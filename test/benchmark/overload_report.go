package benchmark

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The overload's figures, read from what was measured, and its report.

// goodput counts the 200s ok in each minute since the first request, and their rate over the
// steady part as a fraction of rpm: the whole minutes from the second one (in the first, the
// server's window starts empty and the pacer's bucket full) to the last one before the last
// 200's (a part of a minute). The steady part's bounds are returned since the first request;
// the rate is NaN when it holds no whole minute.
func goodput(first time.Time, ok []time.Time, rpm int64) ([]int, float64, time.Duration, time.Duration) {
	if len(ok) == 0 {
		return nil, math.NaN(), 0, 0
	}
	perMinute := make([]int, int(ok[len(ok)-1].Sub(first)/time.Minute)+1)
	for _, t := range ok {
		perMinute[int(t.Sub(first)/time.Minute)]++
	}
	steady := perMinute[min(1, len(perMinute)-1) : len(perMinute)-1]
	if len(steady) == 0 {
		return perMinute, math.NaN(), 0, 0
	}
	sum := 0
	for _, n := range steady {
		sum += n
	}
	return perMinute, float64(sum) / float64(len(steady)) / float64(rpm), time.Minute, time.Duration(len(steady)+1) * time.Minute
}

// fairFigures are the namespaces' shares of the endpoint, window by window.
type fairFigures struct {
	// jain is Jain's index in each window counted, and counted how many namespaces it was of.
	jain    []float64
	counted []int
	// all is how many of those windows counted every namespace.
	all int
	// from and to bound the windows counted, since the first create.
	from, to time.Duration
}

// fairness measures how the endpoint's calls were shared among the namespaces that wanted them:
// in each window of length w (from the first step's end on), Jain's index of the steps that
// the namespaces with work throughout the window completed in it. A namespace has work
// throughout a window when its first run was created before the window began and its last step
// ended after the window ended. A window counts when at least two namespaces had work
// throughout it and the endpoint completed at least busy steps in it: with room to spare,
// nobody waits for a share and there is nothing to be fair about. ends are each namespace's
// step ends in order.
//
// Jain's index of x_1..x_n is (Σx)² / (n·Σx²): 1 when each of the n completed as many steps,
// k/n when k of them shared the steps equally and the others had none.
func fairness(ends [][]time.Time, createdAt []time.Time, began time.Time, w time.Duration, busy int) fairFigures {
	var f fairFigures
	var first, last time.Time
	for _, e := range ends {
		if len(e) == 0 {
			continue
		}
		if first.IsZero() || e[0].Before(first) {
			first = e[0]
		}
		if e[len(e)-1].After(last) {
			last = e[len(e)-1]
		}
	}
	in := func(e []time.Time, start time.Time) float64 {
		lo := sort.Search(len(e), func(k int) bool { return !e[k].Before(start) })
		hi := sort.Search(len(e), func(k int) bool { return !e[k].Before(start.Add(w)) })
		return float64(hi - lo)
	}
	for start := first; !first.IsZero() && !start.Add(w).After(last); start = start.Add(w) {
		var xs []float64
		total := 0.0
		for i, e := range ends {
			n := in(e, start)
			total += n
			if len(e) > 0 && !createdAt[i].After(start) && !e[len(e)-1].Before(start.Add(w)) {
				xs = append(xs, n)
			}
		}
		if len(xs) < 2 || total < float64(busy) {
			continue
		}
		if len(f.jain) == 0 {
			f.from = start.Sub(began)
		}
		f.to = start.Add(w).Sub(began)
		f.jain = append(f.jain, jain(xs))
		f.counted = append(f.counted, len(xs))
		if len(xs) == len(ends) {
			f.all++
		}
	}
	return f
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²); NaN when all are 0.
func jain(xs []float64) float64 {
	var sum, squares float64
	for _, x := range xs {
		sum += x
		squares += x * x
	}
	if squares == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// latecomers are the longest wait of a namespace from its first create to its first step's
// end, which namespace that was, and the time between the first namespace to finish and the
// last.
func latecomers(ends [][]time.Time, createdAt []time.Time) (time.Duration, int, time.Duration) {
	var longest time.Duration
	which := -1
	var firstDone, lastDone time.Time
	for i, e := range ends {
		if len(e) == 0 {
			continue
		}
		if d := e[0].Sub(createdAt[i]); which < 0 || d > longest {
			longest, which = d, i
		}
		done := e[len(e)-1]
		if firstDone.IsZero() || done.Before(firstDone) {
			firstDone = done
		}
		if done.After(lastDone) {
			lastDone = done
		}
	}
	return longest, which, lastDone.Sub(firstDone)
}

// Targets of the overload.
const (
	targetGoodput   = 0.9
	target429s      = 10.0
	targetFairness  = 0.95
	targetPeakRSSMB = 500
)

// overloadReport prints the overload's figures beside their targets, and the misses.
func overloadReport(f overloadFigures) (string, []string) {
	o := f.o
	var b strings.Builder
	fmt.Fprintf(&b, "\n### overload: %d runs x %d model calls from %d namespaces (created one namespace after another) on one ClusterModelEndpoint; "+
		"the server allows %d requests a minute, answers 429 beyond, and takes %s per answer (Baton only)\n\n",
		o.runs, o.steps, o.namespaces, o.rpm, o.latency)
	var misses []string
	row := func(figure, measured, target string, met bool) {
		mark := "met"
		if !met {
			mark = "**missed**"
			misses = append(misses, figure+": "+measured+", target "+target)
		}
		if target == "" {
			mark = ""
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", figure, measured, target, mark)
	}
	b.WriteString("| figure | measured | target | |\n|---|---|---|---|\n")
	row(fmt.Sprintf("goodput: 200s a minute / R over the whole minutes from %.0f s to %.0f s after the first call", f.steadyFrom.Seconds(), f.steadyTo.Seconds()),
		fmt.Sprintf("%.3f (%.0f a minute)", f.goodput, f.goodput*float64(o.rpm)), fmt.Sprintf(">= %.1f", targetGoodput), f.goodput >= targetGoodput)
	per1000 := 1000 * float64(f.limited) / float64(max(f.ok, 1))
	row("429s per 1,000 calls answered 200", fmt.Sprintf("%.2f (%d of %d)", per1000, f.limited, f.ok), fmt.Sprintf("<= %.0f", target429s), per1000 <= target429s)
	failed := o.runs - f.reasons[string(v1alpha1.ReasonCompleted)]
	row("runs failed for rate reasons / at all", fmt.Sprintf("%d / %d", f.rateFailed, failed), "0", failed == 0)
	fairMean, fairMin := mean(f.fair.jain), minOf(f.fair.jain)
	row(fmt.Sprintf("fairness: Jain's index of the steps each namespace with work completed, by %s window, mean (lowest)", o.fairWindow()),
		fmt.Sprintf("%.4f (%.4f), %d windows", fairMean, fairMin, len(f.fair.jain)), fmt.Sprintf(">= %.2f", targetFairness),
		fairMean >= targetFairness)
	rss := float64(f.peakRSS) / (1 << 20)
	row("peak RSS of the process", fmt.Sprintf("%.0f MB", rss), fmt.Sprintf("<= %d MB", targetPeakRSSMB), rss <= targetPeakRSSMB)
	row(fmt.Sprintf("drain time, first create to last end (ideal %d x %d / %d a minute = %.2f min)", o.runs, o.steps, o.rpm, o.ideal().Minutes()),
		fmt.Sprintf("%.2f min, %.3fx the ideal", f.drain.Minutes(), f.drain.Seconds()/o.ideal().Seconds()), "", true)
	fmt.Fprintf(&b, "\n200s in each minute since the first call: %v; the most the server admitted within a minute: %d (R = %d).\n", f.perMinute, f.peakWindow, o.rpm)
	fmt.Fprintf(&b, "429s by second since the first call: %s.\n", countsBySecond(f.limitedAt))
	fmt.Fprintf(&b, "Runs by termination reason: %v; failed steps in all runs: %d. Runs created in %.1f s.\n", f.reasons, f.stepErrors, f.created.Seconds())
	fmt.Fprintf(&b, "Longest wait of a namespace from its first create to its first step's end: %.1f s (the %s created). From the first namespace's last step to the last one's: %.1f s.\n",
		f.firstStep.Seconds(), ordinal(f.firstStepNS+1), f.spread.Seconds())
	limits := "none"
	if l := f.endpoint.EffectiveLimits; l != nil && l.RequestsPerMinute != nil {
		limits = fmt.Sprintf("%d requests a minute", *l.RequestsPerMinute)
	}
	fmt.Fprintf(&b, "The endpoint's status at the end: %d 429s seen, effective limits %s. Steps sent back into line after a 429: %.0f.\n",
		f.endpoint.RateLimited, limits, f.requeued)
	fmt.Fprintf(&b, "Process CPU %.1f s (%.2f ms a call), API server CPU %.1f s; Baton's mutating requests per call: %s\n",
		f.cpu, 1000*f.cpu/float64(o.calls()), f.apiCPU, f.controller.format(float64(o.calls()), "%.3f"))
	fmt.Fprintf(&b, "Fairness windows: from %.0f s to %.0f s after the first create, those with two namespaces or more with work throughout "+
		"and at least %d steps (90%% of R); namespaces counted in each: %d to %d, all %d of them in %d windows. Jain's index by window: %s\n",
		f.fair.from.Seconds(), f.fair.to.Seconds(), o.busy(), minInt(f.fair.counted), maxInt(f.fair.counted), o.namespaces, f.fair.all,
		formatAll(f.fair.jain, "%.3f"))
	b.WriteString("\nThe drain every 10 s since the first create (the endpoint's status is written every 5 s at most):\n\n")
	b.WriteString(f.timeline)
	return b.String(), misses
}

// secondsSince counts ts by whole seconds since first.
func secondsSince(first time.Time, ts []time.Time) map[int]int {
	out := map[int]int{}
	for _, t := range ts {
		out[int(t.Sub(first)/time.Second)]++
	}
	return out
}

// countsBySecond writes counts by second as "50 s: 3, 51 s: 1", in order; "none" for none.
func countsBySecond(counts map[int]int) string {
	if len(counts) == 0 {
		return "none"
	}
	secs := make([]int, 0, len(counts))
	for s := range counts {
		secs = append(secs, s)
	}
	sort.Ints(secs)
	parts := make([]string, len(secs))
	for i, s := range secs {
		parts[i] = fmt.Sprintf("%d s: %d", s, counts[s])
	}
	return strings.Join(parts, ", ")
}

func minInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return slices.Min(xs)
}

func maxInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func minOf(xs []float64) float64 {
	out := math.NaN()
	for _, x := range xs {
		if math.IsNaN(out) || x < out {
			out = x
		}
	}
	return out
}

func formatAll(xs []float64, verb string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(verb, x)
	}
	return strings.Join(parts, " ")
}

// ordinal is 1st, 2nd, 3rd, 4th...
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// timeline is the drain every 10 s: the 200s and 429s in those 10 s, and the operator's state at
// their end.
func timeline(samples []sample, began time.Time, ok, limited []time.Time) string {
	var b strings.Builder
	b.WriteString("| s | 200s | 429s | reconciles queued | steps in flight | endpoint: waiting, in flight, requests last minute |\n|---|---|---|---|---|---|\n")
	count := func(ts []time.Time, from, to time.Duration) int {
		lo := sort.Search(len(ts), func(i int) bool { return ts[i].Sub(began) >= from })
		hi := sort.Search(len(ts), func(i int) bool { return ts[i].Sub(began) >= to })
		return hi - lo
	}
	for _, x := range samples {
		sec := int(x.at.Round(time.Second) / time.Second)
		if sec%10 != 0 {
			continue
		}
		to := time.Duration(sec) * time.Second
		fmt.Fprintf(&b, "| %d | %d | %d | %.0f | %.0f | %d, %d, %d |\n", sec, count(ok, to-10*time.Second, to), count(limited, to-10*time.Second, to),
			x.queued, x.steps, x.waiting, x.calling, x.lastMinute)
	}
	return b.String()
}
