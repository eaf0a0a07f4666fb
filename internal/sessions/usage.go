package sessions

import (
	"slices"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// Usage is what a session's turns used, all told.
type Usage struct {
	// Turns counts the turns, Started those of them that started.
	Turns, Started int32
	Tokens         int64
	Cost           decimal.Decimal
}

// Settle is settled advanced over the ended turns that follow it in their order: what they used
// is kept in the session's status from then on, so that deleting an ended turn gives nothing of
// the session's limits back. turns are sorted (Before).
func Settle(settled *v1alpha1.SessionUsage, turns []Turn) *v1alpha1.SessionUsage {
	var out v1alpha1.SessionUsage
	if settled != nil {
		out = *settled
	}
	spent := cost.Amount(out.Cost)
	moved := false
	for _, t := range turns {
		if t.Number <= out.ThroughTurn {
			continue
		}
		if !t.Phase.Terminal() {
			break
		}
		out.ThroughTurn, out.Turns, out.TokensUsed = t.Number, inc32(out.Turns), satAdd(out.TokensUsed, t.Tokens)
		if t.Started {
			out.Started = inc32(out.Started)
		}
		spent = spent.Add(t.Cost)
		moved = true
	}
	if !moved {
		return settled
	}
	out.Cost = cost.Format(spent)
	return &out
}

// UsageOf is what a session's turns used: what its status counts of its settled turns, and the
// turns after them. It is never less than the status said last: a turn deleted while it was at
// work keeps what it had used.
func UsageOf(st *v1alpha1.AgentSessionStatus, turns []Turn) Usage {
	sorted := slices.Clone(turns)
	slices.SortFunc(sorted, Compare)
	u, _ := usage(st, sorted)
	return u
}

// usage is UsageOf of turns sorted (Before), and what the status's settled usage becomes.
func usage(st *v1alpha1.AgentSessionStatus, sorted []Turn) (Usage, *v1alpha1.SessionUsage) {
	settled := Settle(st.Settled, sorted)
	u := Usage{Cost: decimal.Zero}
	through := int64(0)
	if settled != nil {
		u = Usage{Turns: settled.Turns, Started: settled.Started, Tokens: settled.TokensUsed, Cost: cost.Amount(settled.Cost)}
		through = settled.ThroughTurn
	}
	for _, t := range sorted {
		if t.Number <= through {
			continue
		}
		u.Turns, u.Tokens, u.Cost = inc32(u.Turns), satAdd(u.Tokens, t.Tokens), u.Cost.Add(t.Cost)
		if t.Started {
			u.Started = inc32(u.Started)
		}
	}
	u.Turns, u.Tokens = max(u.Turns, st.Turns), max(u.Tokens, st.TokensUsed)
	if last := cost.Amount(st.Cost); last.GreaterThan(u.Cost) {
		u.Cost = last
	}
	return u, settled
}

// WaitsFor names the turn that t waits for, if any: an unended turn before it, or a turn after it
// that started and has not ended (turns stored out of their order still never run at once).
func WaitsFor(t Turn, turns []Turn) string {
	var before *Turn
	for i := range turns {
		o := &turns[i]
		if o.UID == t.UID && o.Name == t.Name || o.Phase.Terminal() {
			continue
		}
		if !Before(*o, t) {
			if o.Phase.Started() {
				return o.Name
			}
			continue
		}
		if before == nil || Before(*before, *o) {
			before = o
		}
	}
	if before == nil {
		return ""
	}
	return before.Name
}

// Previous is the last turn before t that started and ended: t's history and state follow on
// from it.
func Previous(t Turn, turns []Turn) (Turn, bool) {
	var last *Turn
	for i := range turns {
		o := &turns[i]
		if o.UID == t.UID && o.Name == t.Name || !o.Phase.Terminal() || !o.Started || !Before(*o, t) {
			continue
		}
		if last == nil || Before(*last, *o) {
			last = o
		}
	}
	if last == nil {
		return Turn{}, false
	}
	return *last, true
}

func inc32(a int32) int32 {
	if a == 1<<31-1 {
		return a
	}
	return a + 1
}
