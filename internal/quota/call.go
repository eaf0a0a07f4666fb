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
	day, month := DayStart(now).Add(24*time.Hour), MonthStart(now).AddDate(0, 1, 0)
	checks := []capCheck{
		money(c.CostPerDay, spent.DayCost, worst, "today (UTC)", c.Currency, day),
		money(c.CostPerMonth, spent.MonthCost, worst, "this month (UTC)", c.Currency, month),
		tokens(c.TokensPerDay, spent.DayTokens, call.Tokens, "today (UTC)", day),
		tokens(c.TokensPerMonth, spent.MonthTokens, call.Tokens, "this month (UTC)", month),
	}
	for _, k := range checks {
		if k.set && k.alone {
			return CallVerdict{Outcome: Exceeded, Quota: k.quota, Reason: k.reason, Message: k.aloneMessage}
		}
	}
	for _, k := range checks {
		if k.set && k.over {
			return CallVerdict{Outcome: Held, Quota: k.quota, Message: k.overMessage, Until: k.until}
		}
	}
	return CallVerdict{Outcome: Allowed}
}

// capCheck is one cap's word on a call.
type capCheck struct {
	set, alone, over          bool
	quota                     string
	reason                    v1alpha1.TerminationReason
	aloneMessage, overMessage string
	until                     time.Time
}

func money(m Money, spent, worst decimal.Decimal, period, currency string, until time.Time) capCheck {
	if !m.Set {
		return capCheck{}
	}
	return capCheck{set: true, quota: m.Quota, reason: v1alpha1.ReasonCostBudgetExceeded, until: until,
		alone: worst.GreaterThan(m.Limit),
		over:  !cost.Fits(spent, worst, m.Limit),
		aloneMessage: fmt.Sprintf("quota %q: the next model call could cost up to %s %s, more than the %s %s the namespace may spend %s",
			m.Quota, cost.Format(worst), currency, cost.Format(m.Limit), currency, period),
		overMessage: fmt.Sprintf("quota %q: %s of %s %s spent %s, and the next model call could cost up to %s; it waits until %s or a higher cap",
			m.Quota, cost.Format(spent), cost.Format(m.Limit), currency, period, cost.Format(worst), until.Format(time.RFC3339)),
	}
}

func tokens(t Tokens, spent, worst int64, period string, until time.Time) capCheck {
	if !t.Set {
		return capCheck{}
	}
	return capCheck{set: true, quota: t.Quota, reason: v1alpha1.ReasonTokenBudgetExceeded, until: until,
		alone: worst > t.Limit,
		over:  spent+worst > t.Limit,
		aloneMessage: fmt.Sprintf("quota %q: the next model call could use up to %d tokens, more than the %d the namespace may use %s",
			t.Quota, worst, t.Limit, period),
		overMessage: fmt.Sprintf("quota %q: %d of %d tokens used %s, and the next model call could use up to %d; it waits until %s or a higher cap",
			t.Quota, spent, t.Limit, period, worst, until.Format(time.RFC3339)),
	}
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
