package quota

import (
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// A model call is checked against its namespace's caps before it is made, with its worst case:
// the prompt it sends and the most output it may get back, at its model's price. The ledger
// (package ledger) holds what the namespace's calls spent and reserved; this is the decision.

// Spent is what a namespace's calls booked, settled and reserved in the current UTC day and
// month: tokens in every currency, cost in the caps' currency.
type Spent struct {
	DayTokens, MonthTokens int64
	DayCost, MonthCost     decimal.Decimal
}

// Call is a model call's worst case.
type Call struct {
	// Tokens is the prompt's tokens and the most output the call may get back.
	Tokens int64
	// Cost is what the call costs at most, in Currency, when Priced.
	Cost     decimal.Decimal
	Currency string
	Priced   bool
	// Free is a call that costs nothing by its nature (a Scripted agent's turn): it counts
	// its tokens and is never refused for want of a price.
	Free bool
}

// CallOutcome is what becomes of a call.
type CallOutcome int

const (
	// Allowed is a call that may be made.
	Allowed CallOutcome = iota
	// Held is a call that would pass a cap: its run waits until the period resets or the cap
	// is raised.
	Held
	// Exceeded is a call whose worst case alone is more than a cap: its run ends for it.
	Exceeded
	// Refused is a call that cannot be counted against a cost cap (no price, another
	// currency): its step fails.
	Refused
)

// CallVerdict is what becomes of a call, and why.
type CallVerdict struct {
	Outcome CallOutcome
	// Quota names the quota whose cap decided.
	Quota string
	// Reason is the run's end for an Exceeded call: CostBudgetExceeded or TokenBudgetExceeded.
	Reason v1alpha1.TerminationReason
	// Message says which cap, what was spent and what the call could cost.
	Message string
	// Until is when the cap's period resets, for a Held call.
	Until time.Time
}

// CheckCall decides a call against the caps, given what the namespace spent: a refusal first
// (a cost cap needs a price in its currency), then a cap its worst case alone passes, then a
// cap it would pass with what was spent. Caps are checked day before month, cost before tokens.
func CheckCall(c *Caps, spent Spent, call Call, now time.Time) CallVerdict {
	if c.Costs() && !call.Free {
		q := c.CostPerDay.Quota
		if !c.CostPerDay.Set {
			q = c.CostPerMonth.Quota
		}
		switch {
		case !call.Priced:
			return CallVerdict{Outcome: Refused, Quota: q, Message: fmt.Sprintf(
				"quota %q caps the namespace's cost, and the model has no price: give its endpoint a price for it, or call it where no cost cap applies", q)}
		case call.Currency != c.Currency:
			return CallVerdict{Outcome: Refused, Quota: q, Message: fmt.Sprintf(
				"quota %q caps the namespace's cost in %s, and the model is priced in %s", q, c.Currency, call.Currency)}
		}
	}
	worst := call.Cost
	if call.Free || !call.Priced {
		worst = decimal.Zero
	}
	checks := [...]capCheck{
		{money: c.CostPerDay, spentCost: spent.DayCost, period: day},
		{money: c.CostPerMonth, spentCost: spent.MonthCost, period: month},
		{tokens: c.TokensPerDay, spentTokens: spent.DayTokens, period: day},
		{tokens: c.TokensPerMonth, spentTokens: spent.MonthTokens, period: month},
	}
	for i := range checks {
		if k := &checks[i]; k.alone(worst, call.Tokens) {
			return k.verdict(Exceeded, worst, call.Tokens, c.Currency, now)
		}
	}
	for i := range checks {
		if k := &checks[i]; k.over(worst, call.Tokens) {
			return k.verdict(Held, worst, call.Tokens, c.Currency, now)
		}
	}
	return CallVerdict{Outcome: Allowed}
}

// The periods of the caps.
const (
	day = iota
	month
)

// capCheck is one cap, cost or tokens, of a day or a month, with what was spent against it: its
// word on a call is worked out without a message, which only the cap that decides writes.
type capCheck struct {
	money       Money
	spentCost   decimal.Decimal
	tokens      Tokens
	spentTokens int64
	period      int
}

// alone reports whether the call's worst case alone is more than the cap.
func (k *capCheck) alone(worst decimal.Decimal, tokens int64) bool {
	if k.money.Set {
		return worst.GreaterThan(k.money.Limit)
	}
	return k.tokens.Set && tokens > k.tokens.Limit
}

// over reports whether the call would pass the cap with what was spent.
func (k *capCheck) over(worst decimal.Decimal, tokens int64) bool {
	if k.money.Set {
		return !cost.Fits(k.spentCost, worst, k.money.Limit)
	}
	return k.tokens.Set && k.spentTokens+tokens > k.tokens.Limit
}

// verdict is the cap's word on the call, Held or Exceeded, in words.
func (k *capCheck) verdict(outcome CallOutcome, worst decimal.Decimal, tokens int64, currency string, now time.Time) CallVerdict {
	name, until := "today (UTC)", DayStart(now).Add(24*time.Hour)
	if k.period == month {
		name, until = "this month (UTC)", MonthStart(now).AddDate(0, 1, 0)
	}
	v := CallVerdict{Outcome: outcome}
	switch {
	case k.money.Set && outcome == Exceeded:
		v.Quota, v.Reason = k.money.Quota, v1alpha1.ReasonCostBudgetExceeded
		v.Message = fmt.Sprintf("quota %q: the next model call could cost up to %s %s, more than the %s %s the namespace may spend %s",
			k.money.Quota, cost.Format(worst), currency, cost.Format(k.money.Limit), currency, name)
	case k.money.Set:
		v.Quota, v.Until = k.money.Quota, until
		v.Message = fmt.Sprintf("quota %q: %s of %s %s spent %s, and the next model call could cost up to %s; it waits until %s or a higher cap",
			k.money.Quota, cost.Format(k.spentCost), cost.Format(k.money.Limit), currency, name, cost.Format(worst), until.Format(time.RFC3339))
	case outcome == Exceeded:
		v.Quota, v.Reason = k.tokens.Quota, v1alpha1.ReasonTokenBudgetExceeded
		v.Message = fmt.Sprintf("quota %q: the next model call could use up to %d tokens, more than the %d the namespace may use %s",
			k.tokens.Quota, tokens, k.tokens.Limit, name)
	default:
		v.Quota, v.Until = k.tokens.Quota, until
		v.Message = fmt.Sprintf("quota %q: %d of %d tokens used %s, and the next model call could use up to %d; it waits until %s or a higher cap",
			k.tokens.Quota, k.spentTokens, k.tokens.Limit, name, tokens, until.Format(time.RFC3339))
	}
	return v
}

// MonthStart is the start of now's UTC calendar month.
func MonthStart(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Periods are the ledger's names of now's UTC day and month.
func Periods(now time.Time) (day, month string) {
	u := now.UTC()
	return u.Format(time.DateOnly), u.Format("2006-01")
}
