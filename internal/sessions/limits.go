package sessions

import (
	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/quota"
)

// SetBy is how a run's status.limits names a session that set one of its limits.
func SetBy(session string) string { return "AgentSession/" + session }

// TurnBounds lowers the bounds of a turn's limits (its namespace's runLimits, b) to what is left
// of its session's limits, themselves under b (Bounded), after the session's other turns used
// tokens and spent: each turn gets at most what the turns before it did not use. A session
// with nothing left still gives a turn one token, and the turn ends on it by its own limit.
func TurnBounds(b quota.RunBounds, session string, limits *v1alpha1.SessionLimits, tokens int64, spent decimal.Decimal) quota.RunBounds {
	l := Bounded(limits, b)
	by := SetBy(session)
	if l.MaxTokens != nil {
		left := max(*l.MaxTokens-tokens, 1)
		if !b.MaxTokens.Set || left < b.MaxTokens.Limit {
			b.MaxTokens = quota.Tokens{Limit: left, Quota: by, Set: true}
		}
	}
	if l.MaxCost != nil {
		left := decimal.Max(cost.Amount(*l.MaxCost).Sub(spent), decimal.Zero)
		if !b.MaxCost.Set || left.LessThan(b.MaxCost.Limit) {
			b.MaxCost = quota.Money{Limit: left, Quota: by, Set: true}
		}
	}
	return b
}

// Bounded is a session's limits under its namespace's runLimits, as a run's are: a session may
// not use more tokens or cost than one run of the namespace may, and one that sets no limit
// gets the namespace's.
func Bounded(l *v1alpha1.SessionLimits, b quota.RunBounds) v1alpha1.SessionLimits {
	out := v1alpha1.SessionLimits{}
	if l != nil {
		out = *l.DeepCopy()
	}
	if b.MaxTokens.Set && (out.MaxTokens == nil || *out.MaxTokens > b.MaxTokens.Limit) {
		t := b.MaxTokens.Limit
		out.MaxTokens = &t
	}
	if b.MaxCost.Set && (out.MaxCost == nil || cost.Amount(*out.MaxCost).GreaterThan(b.MaxCost.Limit)) {
		c := cost.Format(b.MaxCost.Limit)
		out.MaxCost = &c
	}
	return out
}
