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

// The budget check: many runs with limits.maxCost on a priced endpoint whose server reports, for
// every call, the most usage the call's request allows (its prompt, and its whole output cap).
// No run may spend past its budget.

// budgetRuns is how many runs, divided by BENCH_SCALE.
const budgetRuns = 1000

// budgetSteps is each run's steps if its budget lets it finish.
const budgetSteps = 5

// budgets are the runs' spec.limits.maxCost, in turn: from what no call fits in to what the
// whole run fits in (a call costs about 0.00014 USD here).
var budgets = []string{"0.0001", "0.0002", "0.0003", "0.0004", "0.0005", "0.0006", "0.0007", "0.0008", "0.0009", "0.001"}

// budgetFigures are what the budget check found.
type budgetFigures struct {
	runs int
	wall time.Duration
	// reasons counts the runs by termination reason.
	reasons map[string]int
	// over lists the runs that spent past their budget; worst is the highest cost/maxCost
	// ratio, of run worstRun; spent the runs' costs together.
	over     []string
	worst    decimal.Decimal
	worstRun string
	spent    decimal.Decimal
	// calls are the server's 200s.
	calls int64
}

// measureBudget runs n runs, each with a budget of budgets in turn, and reads what each spent.
func (e *env) measureBudget(ctx context.Context, n int) (budgetFigures, error) {
	f := budgetFigures{runs: n, reasons: map[string]int{}}
	ep, err := e.newSharedEndpoint(ctx, "bench-budget", budgetSteps, 0, true)
	if err != nil {
		return f, err
	}
	defer func() { _ = ep.remove(context.WithoutCancel(ctx), e.c) }()
	s := baton{s: e.baton}
	ns, err := newNamespace(ctx, e.c, "baton-budget")
	if err != nil {
		return f, err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx), e.c, s, ns) }()
	cfg := endpointTeam(ns, ep.name, budgetSteps)
	if err := e.c.Create(ctx, cfg); err != nil {
		return f, err
	}
	if err := waitObserved(ctx, e.c, cfg); err != nil {
		return f, err
	}
	e.baton.tracker.follow(ns)
	began := time.Now()
	for i := range n {
		run := s.newRun(ns, i, workload{}).(*v1alpha1.AgentRun)
		run.Spec.Limits = &v1alpha1.LimitOverrides{MaxCost: ptr.To(budgets[i%len(budgets)])}
		if err := e.c.Create(ctx, run); err != nil {
			return f, err
		}
	}
	end, err := e.baton.tracker.waitEnded(ctx, n, 20*time.Minute)
	if err != nil {
		return f, fmt.Errorf("budget: %w", err)
	}
	f.wall = end.Sub(began)
	f.calls = ep.fake.Stats().OK
	list := &v1alpha1.AgentRunList{}
	if err := e.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return f, err
	}
	if len(list.Items) != n {
		return f, fmt.Errorf("budget: %d runs, want %d", len(list.Items), n)
	}
	for _, r := range list.Items {
		f.reasons[string(r.Status.TerminationReason)]++
		spent := decimal.Zero
		if r.Status.Cost != "" {
			if spent, err = cost.Parse(r.Status.Cost); err != nil {
				return f, fmt.Errorf("AgentRun %s: status.cost: %w", r.Name, err)
			}
		}
		limit, err := cost.Parse(*r.Spec.Limits.MaxCost)
		if err != nil {
			return f, err
		}
		f.spent = f.spent.Add(spent)
		if ratio := spent.Div(limit); ratio.GreaterThan(f.worst) {
			f.worst, f.worstRun = ratio, r.Name
		}
		if spent.GreaterThan(limit) {
			f.over = append(f.over, fmt.Sprintf("%s spent %s of %s", r.Name, r.Status.Cost, *r.Spec.Limits.MaxCost))
		}
	}
	return f, nil
}

// budgetReport prints the budget check's figures.
func budgetReport(f budgetFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### budget: %d runs of up to %d steps with spec.limits.maxCost %s to %s USD in turn (Baton only)\n\n",
		f.runs, budgetSteps, budgets[0], budgets[len(budgets)-1])
	b.WriteString("| runs | Completed | CostBudgetExceeded | other | runs over budget | highest cost/maxCost | spent in all | calls | wall s |\n|---|---|---|---|---|---|---|---|---|\n")
	other := f.runs - f.reasons[string(v1alpha1.ReasonCompleted)] - f.reasons[string(v1alpha1.ReasonCostBudgetExceeded)]
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %s (%s) | %s USD | %d | %.1f |\n", f.runs, f.reasons[string(v1alpha1.ReasonCompleted)],
		f.reasons[string(v1alpha1.ReasonCostBudgetExceeded)], other, len(f.over), f.worst.StringFixed(4), f.worstRun, cost.Format(f.spent),
		f.calls, f.wall.Seconds())
	fmt.Fprintf(&b, "\nBy termination reason: %v. The server reported for each call the prompt at 4 bytes a token and its whole output cap.\n", f.reasons)
	for _, o := range f.over {
		fmt.Fprintf(&b, "OVER BUDGET: %s\n", o)
	}
	return b.String()
}
