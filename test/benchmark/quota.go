package benchmark

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// The quota race: many runs of one namespace race on one day's cost cap of its AgentQuota, on a
// priced endpoint whose server reports, for every call, the most usage the call's request allows
// (its prompt, at 4 bytes a token, and its whole output cap). Every call reserves its worst case
// against the cap before it is made; the namespace may pass the cap only by what calls used
// beyond what they reserved. The runs that reach the cap wait, held, until the next day: the race
// ends when every run has ended or is held.

// quotaRaceRuns is how many runs race, divided by BENCH_SCALE; each takes up to budgetSteps
// steps of about 0.00014 USD.
const quotaRaceRuns = 200

// quotaRaceCap is the namespace's day's cost cap: about half of what the runs would spend.
const quotaRaceCap = "0.07"

// quotaFigures are what the quota race found.
type quotaFigures struct {
	runs, ended, held int
	// spent is the day's cost as the AgentQuota's status reads it from the ledger; runsSpent the
	// runs' own costs together.
	spent, runsSpent decimal.Decimal
	calls            int64
	wall             time.Duration
}

// over is how far past the cap the namespace spent, and what share of the cap that is.
func (f quotaFigures) over() (decimal.Decimal, decimal.Decimal) {
	limit := cost.Amount(quotaRaceCap)
	over := decimal.Max(f.spent.Sub(limit), decimal.Zero)
	return over, over.Div(limit)
}

// measureQuotaRace runs n runs of one namespace under one cost cap, and reads what they spent.
func (e *env) measureQuotaRace(ctx context.Context, n int) (quotaFigures, error) {
	f := quotaFigures{runs: n}
	ep, err := e.newSharedEndpoint(ctx, "bench-quota", budgetSteps, 0, true)
	if err != nil {
		return f, err
	}
	defer func() { _ = ep.remove(context.WithoutCancel(ctx), e.c) }()
	s := baton{s: e.baton}
	ns, err := newNamespace(ctx, e.c, "baton-quota")
	if err != nil {
		return f, err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx), e.c, s, ns) }()
	cfg := endpointTeam(ns, ep.name, budgetSteps)
	q := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To(quotaRaceCap)}}
	q.Name, q.Namespace = "race", ns
	for _, obj := range []client.Object{cfg, q} {
		if err := e.c.Create(ctx, obj); err != nil {
			return f, err
		}
	}
	if err := waitObserved(ctx, e.c, cfg); err != nil {
		return f, err
	}
	began := time.Now()
	for i := range n {
		if err := e.c.Create(ctx, s.newRun(ns, i, workload{}).(*v1alpha1.AgentRun)); err != nil {
			return f, err
		}
	}
	if err := f.waitSettled(ctx, e.c, ns, n); err != nil {
		return f, err
	}
	f.wall = time.Since(began)
	f.calls = ep.fake.Stats().OK
	// The quota's status is written every few seconds: wait until it has every call in it.
	deadline := time.Now().Add(time.Minute)
	for {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return f, err
		}
		if f.spent = cost.Amount(q.Status.CostToday); f.spent.GreaterThanOrEqual(f.runsSpent) || time.Now().After(deadline) {
			return f, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitSettled waits until each of the namespace's n runs ended or is held at the cap, and adds
// up what they spent.
func (f *quotaFigures) waitSettled(ctx context.Context, c client.Client, ns string, n int) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		list := &v1alpha1.AgentRunList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		f.ended, f.held, f.runsSpent = 0, 0, decimal.Zero
		for _, r := range list.Items {
			switch {
			case r.Status.Phase.Terminal():
				f.ended++
			case r.Status.QuotaHold != nil:
				f.held++
			}
			f.runsSpent = f.runsSpent.Add(cost.Amount(r.Status.Cost))
		}
		if f.ended+f.held == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("quota race: after 10 minutes %d runs ended and %d are held, of %d", f.ended, f.held, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// quotaReport prints the quota race's figures.
func quotaReport(f quotaFigures) string {
	over, share := f.over()
	var b strings.Builder
	fmt.Fprintf(&b, "\n### quota race: %d runs of one namespace on a day's cost cap of %s USD (Baton only)\n\n", f.runs, quotaRaceCap)
	b.WriteString("| runs | ended | held at the cap | calls | spent (ledger) | runs' costs | past the cap | share of the cap | wall s |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %s USD | %s USD | %s USD | %s | %.1f |\n", f.runs, f.ended, f.held, f.calls,
		cost.Format(f.spent), cost.Format(f.runsSpent), cost.Format(over), share.StringFixed(4), f.wall.Seconds())
	b.WriteString("\nThe server reported for each call the prompt at 4 bytes a token and its whole output cap; a call reserves the prompt Baton estimates and the cap.\n")
	return b.String()
}
