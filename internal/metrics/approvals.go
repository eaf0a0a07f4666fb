package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// waitingApprovals reports, at each scrape, the runs that wait at a gate now: how many, how long
// the oldest has waited, and how many wait past their gate's timeout (which the operator should
// have applied: more than a few seconds of it means the operator is not keeping up, or is not
// running). It reads the informer cache without copying, so a scrape costs no API call.
type waitingApprovals struct {
	mu     sync.Mutex
	reader client.Reader
	clock  clock.PassiveClock

	waiting, oldest, overdue *prometheus.Desc
}

// ApprovalsWaiting is registered once (metrics.go); Setup points it at its manager's cache.
var ApprovalsWaiting = newWaitingApprovals()

// Use reads runs from reader from now on.
func (w *waitingApprovals) Use(reader client.Reader, clk clock.PassiveClock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reader, w.clock = reader, clk
}

func newWaitingApprovals() *waitingApprovals {
	labels := []string{"namespace", "config", "gate"}
	return &waitingApprovals{
		waiting: prometheus.NewDesc("baton_approvals_waiting", "Runs waiting at a gate now, by gate.", labels, nil),
		oldest: prometheus.NewDesc("baton_approval_oldest_wait_seconds",
			"How long the run that has waited longest at a gate has waited so far, by gate.", labels, nil),
		overdue: prometheus.NewDesc("baton_approvals_overdue",
			"Runs waiting at a gate past its timeout, whose onTimeout the operator has not applied yet, by gate.", labels, nil),
	}
}

func (w *waitingApprovals) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.waiting
	ch <- w.oldest
	ch <- w.overdue
}

// WaitingIndex indexes the runs that wait at a gate.
const WaitingIndex = "baton.waitingAtGate"

// WaitingAtGate is the index function of WaitingIndex.
func WaitingAtGate(o client.Object) []string {
	run := o.(*v1alpha1.AgentRun)
	if run.Status.Phase == v1alpha1.PhaseAwaitingApproval && run.Status.PendingApproval != nil {
		return []string{"true"}
	}
	return nil
}

type gateKey struct{ namespace, config, gate string }

type gateWait struct {
	waiting, overdue int
	oldest           time.Duration
}

func (w *waitingApprovals) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	reader, clk := w.reader, w.clock
	w.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runs := &v1alpha1.AgentRunList{}
	// Only the runs waiting at a gate, through their index, and read in place: nothing here
	// changes them, and a scrape costs as little with ten thousand runs at work as with none.
	if err := reader.List(ctx, runs, client.MatchingFields{WaitingIndex: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	now := clk.Now()
	gates := map[gateKey]*gateWait{}
	for i := range runs.Items {
		// The index holds only runs that wait at a gate (WaitingAtGate).
		run := &runs.Items[i]
		p := run.Status.PendingApproval
		k := gateKey{run.Namespace, run.Spec.ConfigRef.Name, p.Gate}
		g := gates[k]
		if g == nil {
			g = &gateWait{}
			gates[k] = g
		}
		g.waiting++
		g.oldest = max(g.oldest, now.Sub(p.Since.Time))
		if p.Expires != nil && now.After(p.Expires.Time) {
			g.overdue++
		}
	}
	for k, g := range gates {
		ch <- prometheus.MustNewConstMetric(w.waiting, prometheus.GaugeValue, float64(g.waiting), k.namespace, k.config, k.gate)
		ch <- prometheus.MustNewConstMetric(w.oldest, prometheus.GaugeValue, g.oldest.Seconds(), k.namespace, k.config, k.gate)
		ch <- prometheus.MustNewConstMetric(w.overdue, prometheus.GaugeValue, float64(g.overdue), k.namespace, k.config, k.gate)
	}
}
