package workflow

import (
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// What a run spends. Each step's cost comes from its endpoint's prices (the shell prices each
// model call, and refuses a call whose worst case could pass limits.maxCost before it is made);
// the core adds it up in status.cost, warns once at costWarningPercent of limits.maxCost, and a
// guard ends the run once nothing is left to spend. Amounts are exact decimals, never floats.

// costWarningPercent is the share of limits.maxCost at which a run warns once.
const costWarningPercent = 90

// Spent is what a run spent so far, from its status.
func Spent(st *v1alpha1.AgentRunStatus) decimal.Decimal { return cost.Amount(st.Cost) }

// addCost adds what a step cost, less the part already counted while it was held at a gate,
// to the run's cost, and takes the step's currency as the run's if it has none yet.
func addCost(s *v1alpha1.AgentRunStatus, res Result) {
	if res.Currency != "" && s.Currency == "" {
		s.Currency = res.Currency
	}
	step := cost.Amount(res.Cost).Sub(cost.Amount(res.CountedCost))
	if !step.IsPositive() {
		return
	}
	s.Cost = cost.Format(Spent(s).Add(step))
}

// costGuard ends a run whose cost reached limits.maxCost: no call can be made within it.
func costGuard(in guardInput) (Trip, bool) {
	limit, ok := in.plan.Limits.MaxCost()
	if !ok {
		return Trip{}, false
	}
	spent := Spent(in.status)
	if spent.LessThan(limit) {
		return Trip{}, false
	}
	return Trip{Reason: v1alpha1.ReasonCostBudgetExceeded, Message: fmt.Sprintf(
		"cost budget: %s of %s%s spent; %s was not started", cost.Format(spent), cost.Format(limit), currency(in.status), in.next)}, true
}

// warnCost warns once, with an Event and a condition, when a step carries the run's cost across
// costWarningPercent of limits.maxCost.
func warnCost(p *Plan, d *Update, before decimal.Decimal, now time.Time) {
	limit, ok := p.Limits.MaxCost()
	if !ok {
		return
	}
	s := &d.Status
	spent := Spent(s)
	if cost.Percent(spent, limit) < costWarningPercent || cost.Percent(before, limit) >= costWarningPercent {
		return
	}
	msg := fmt.Sprintf("cost budget: %s of %s%s spent (%d%%), past the warning at %d%%",
		cost.Format(spent), cost.Format(limit), currency(s), cost.Percent(spent, limit), costWarningPercent)
	setCondition(s, now, v1alpha1.ConditionCostBudgetWarning, metav1.ConditionTrue, v1alpha1.ReasonThresholdReached, msg)
	d.event(EventWarning, EventCostBudgetWarning, "%s", msg)
}

// currency is the run's currency as a message suffix (" USD"), or nothing when none is known.
func currency(s *v1alpha1.AgentRunStatus) string {
	if s.Currency == "" {
		return ""
	}
	return " " + s.Currency
}
