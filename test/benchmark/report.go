package benchmark

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Reports: one markdown table per workload of the medians over the repetitions, per
// controller, and Baton/baseline ratios, each the median of the repetitions' own ratios (both
// controllers of a repetition ran on the same machine at nearly the same time).

// pair is one repetition: the baseline's measurement and Baton's.
type pair struct{ base, baton measurement }

// column is one figure of a measurement.
type column struct {
	title string
	// value is the figure; NaN when it is not known.
	value  func(m measurement) float64
	format string
}

func perHandoff(v float64, m measurement) float64 { return v / float64(m.handoffs) }

var columns = []column{
	{"wall s", func(m measurement) float64 { return m.wall.Seconds() }, "%.2f"},
	{"handoffs/s", func(m measurement) float64 { return float64(m.handoffs) / m.wall.Seconds() }, "%.1f"},
	{"mutating req/handoff", func(m measurement) float64 { return perHandoff(m.controller.total(), m) }, "%.3f"},
	{"409s", func(m measurement) float64 { return m.conflicts.total() }, "%.0f"},
	{"reconciles/handoff", func(m measurement) float64 { return perHandoff(m.reconciles, m) }, "%.2f"},
	{"reconcile p50 ms", func(m measurement) float64 { return m.reconcileP50 * 1000 }, "%.1f"},
	{"reconcile p99 ms", func(m measurement) float64 { return m.reconcileP99 * 1000 }, "%.1f"},
	{"apiserver CPU ms/handoff", func(m measurement) float64 { return perHandoff(m.apiCPU*1000, m) }, "%.3f"},
	{"etcd CPU ms/handoff", func(m measurement) float64 { return perHandoff(m.etcdCPU*1000, m) }, "%.3f"},
	{"process CPU s/1000 handoffs", func(m measurement) float64 { return perHandoff(m.cpu*1000, m) }, "%.3f"},
	{"peak RSS MB", func(m measurement) float64 { return float64(m.peakRSS) / (1 << 20) }, "%.0f"},
	{"object bytes", func(m measurement) float64 { return float64(m.objectBytes) }, "%.0f"},
	{"status bytes", func(m measurement) float64 { return float64(m.statusBytes) }, "%.0f"},
	{"bytes/status write", func(m measurement) float64 { return m.bodyBytes }, "%.0f"},
	{"status write ms", func(m measurement) float64 { return m.statusLatency * 1000 }, "%.2f"},
	{"handoff gap p50 ms", func(m measurement) float64 { return m.gapP50 * 1000 }, "%.1f"},
	{"handoff gap p99 ms", func(m measurement) float64 { return m.gapP99 * 1000 }, "%.1f"},
}

// columnNamed is the column with that title.
func columnNamed(title string) column {
	for _, c := range columns {
		if c.title == title {
			return c
		}
	}
	panic("no column " + title)
}

// median of the values that are known; NaN if none is.
func median(vs []float64) float64 {
	var known []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			known = append(known, v)
		}
	}
	if len(known) == 0 {
		return math.NaN()
	}
	sort.Float64s(known)
	n := len(known)
	if n%2 == 1 {
		return known[n/2]
	}
	return (known[n/2-1] + known[n/2]) / 2
}

// medianOf is a column's median over the repetitions, for one controller.
func medianOf(reps []pair, c column, baton bool) float64 {
	vs := make([]float64, len(reps))
	for i, p := range reps {
		m := p.base
		if baton {
			m = p.baton
		}
		vs[i] = c.value(m)
	}
	return median(vs)
}

// ratioOf is the median of the repetitions' Baton/baseline ratios of a column.
func ratioOf(reps []pair, c column) float64 {
	vs := make([]float64, len(reps))
	for i, p := range reps {
		vs[i] = c.value(p.baton) / c.value(p.base)
	}
	return median(vs)
}

func cell(format string, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

// table is the workload's markdown table, then each controller's requests per handoff.
func table(w workload, reps []pair) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s: %d runs x %d handoffs, step delay %s, %d-byte outputs (median of %d)\n\n",
		w.name, w.runs, w.steps, w.delay, w.output, len(reps))
	b.WriteString("| |")
	for _, c := range columns {
		fmt.Fprintf(&b, " %s |", c.title)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(columns)))
	for _, row := range []struct {
		name  string
		value func(c column) string
	}{
		{"baseline", func(c column) string { return cell(c.format, medianOf(reps, c, false)) }},
		{"baton", func(c column) string { return cell(c.format, medianOf(reps, c, true)) }},
		{"baton/baseline", func(c column) string { return cell("%.2fx", ratioOf(reps, c)) }},
	} {
		fmt.Fprintf(&b, "\n| %s |", row.name)
		for _, c := range columns {
			fmt.Fprintf(&b, " %s |", row.value(c))
		}
	}
	b.WriteString("\n\nMutating requests per handoff at the API server, all repetitions (the benchmark's creates of runs and the API server's own requests left out):\n\n")
	for _, side := range []struct {
		name  string
		baton bool
	}{{"baseline", false}, {"baton", true}} {
		total, refused, handoffs := requests{}, requests{}, 0
		for _, p := range reps {
			m := p.base
			if side.baton {
				m = p.baton
			}
			for k, v := range m.controller {
				total[k] += v
			}
			for k, v := range m.conflicts {
				refused[k] += v
			}
			handoffs += m.handoffs
		}
		fmt.Fprintf(&b, "- %s: %s; refused with 409 in all: %s\n", side.name, total.format(float64(handoffs), "%.3f"), refused)
	}
	b.WriteString("\nProcess CPU and peak RSS are this process's while one controller worked and the other was idle. " +
		"Reconcile p50 and p99 are estimated from controller-runtime's histogram buckets, diffed around the measurement, by linear " +
		"interpolation within the bucket where the percentile falls (as Prometheus' histogram_quantile); its first bucket ends at " +
		"5 ms, so a p50 under 5 ms reads as a fraction of it. " +
		"Bytes per status write are the API server's apiserver_request_body_size_bytes.\n")
	return b.String()
}

// raw is one measurement's figures in a line, for the record.
func raw(rep int, name string, m measurement) string {
	return fmt.Sprintf("rep %d %-8s wall %.2fs, %d handoffs (%.1f/s); mutating %s; creates %s; API server's own %s; "+
		"409s %s; reconciles %.0f, p50 %.1f ms, p99 %.1f ms; CPU apiserver %.2fs etcd %s process %.2fs; peak RSS %.0f MB; "+
		"object %d B (status %d B); status writes %.0f at the API server, %d sent, %s B/write at the API server, %.0f B/write sent, %.2f ms mean",
		rep, name, m.wall.Seconds(), m.handoffs, float64(m.handoffs)/m.wall.Seconds(), m.controller, m.user, m.self,
		m.conflicts, m.reconciles, m.reconcileP50*1000, m.reconcileP99*1000, m.apiCPU, cell("%.2fs", m.etcdCPU), m.cpu, float64(m.peakRSS)/(1<<20),
		m.objectBytes, m.statusBytes, m.statusWrites, m.clientStatusWrites, cell("%.0f", m.bodyBytes), m.clientBodyBytes,
		m.statusLatency*1000)
}

// checks are the measurement's sanity checks that failed: the API server and the benchmark
// should agree on what was created and written.
func checks(s subject, w workload, m measurement) []string {
	var out []string
	if created := m.user.total(); created != float64(w.runs) {
		out = append(out, fmt.Sprintf("the API server counted %.0f creates of %s, the benchmark made %d", created, s.resource(), w.runs))
	}
	if sent := float64(m.clientStatusWrites); math.Abs(m.statusWrites-sent) > 0.02*sent+1 {
		out = append(out, fmt.Sprintf("the API server counted %.0f status writes, %s's client sent %.0f", m.statusWrites, s.name(), sent))
	}
	if _, ok := s.(baseline); ok && m.controller.total() != float64(m.handoffs)+m.conflicts.total() {
		out = append(out, fmt.Sprintf("the baseline made %.0f mutating requests for %d handoffs and %.0f 409s: %s",
			m.controller.total(), m.handoffs, m.conflicts.total(), m.controller))
	}
	return out
}
