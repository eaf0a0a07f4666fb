package cost

import (
	"math"

	"github.com/shopspring/decimal"
)

// Fits reports whether a call whose worst case is worst may be made when spent has been spent
// of limit: whether spent + worst is at most limit. Whether there is a limit at all is the
// caller's to say; a limit of 0 admits only calls that cost nothing.
func Fits(spent, worst, limit decimal.Decimal) bool {
	return spent.Add(worst).LessThanOrEqual(limit)
}

// Percent is spent as a whole percentage of limit, rounded down: 89 until 90% has been spent,
// for a warning at 90%. It passes 100 when spent passes limit. A limit of 0 or less is spent
// whole (100) as soon as anything is spent, and not at all (0) before. It saturates at
// math.MaxInt64.
func Percent(spent, limit decimal.Decimal) int64 {
	switch {
	case !spent.IsPositive():
		return 0
	case !limit.IsPositive():
		return 100
	}
	q, _ := spent.Shift(2).QuoRem(limit, 0)
	if b := q.BigInt(); !b.IsInt64() {
		return math.MaxInt64
	}
	return q.IntPart()
}

// nano is a billionth: the ledger's unit of money.
var nano = decimal.New(1, -9)

// Nanos is d in billionths, rounded up, as the ledger books a call's cost: a booked amount is
// never less than what was spent. It saturates at math.MaxInt64.
func Nanos(d decimal.Decimal) int64 {
	n := d.Div(nano).Ceil()
	if b := n.BigInt(); !b.IsInt64() {
		if b.Sign() < 0 {
			return 0
		}
		return math.MaxInt64
	}
	return max(n.IntPart(), 0)
}

// FromNanos is an amount of n billionths.
func FromNanos(n int64) decimal.Decimal { return decimal.New(n, -9) }
