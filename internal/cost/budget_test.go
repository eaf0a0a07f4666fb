package cost_test

import (
	"math"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/cost"
)

func mustParse(t testing.TB, s string) decimal.Decimal {
	t.Helper()
	d, err := cost.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFits(t *testing.T) {
	for name, tc := range map[string]struct {
		spent, worst, limit string
		want                bool
	}{
		"well within":              {spent: "0.50", worst: "0.10", limit: "2.50", want: true},
		"exactly the limit":        {spent: "2.40", worst: "0.10", limit: "2.50", want: true},
		"a trillionth over":        {spent: "2.400000000001", worst: "0.1", limit: "2.50", want: false},
		"spent already past":       {spent: "3", worst: "0", limit: "2.50", want: false},
		"a free call at the limit": {spent: "2.50", worst: "0", limit: "2.50", want: true},
		"a zero limit, free call":  {spent: "0", worst: "0", limit: "0", want: true},
		"a zero limit, paid call":  {spent: "0", worst: "0.000000000001", limit: "0", want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cost.Fits(mustParse(t, tc.spent), mustParse(t, tc.worst), mustParse(t, tc.limit)); got != tc.want {
				t.Errorf("Fits(%s, %s, %s) = %t, want %t", tc.spent, tc.worst, tc.limit, got, tc.want)
			}
		})
	}
}

func TestPercent(t *testing.T) {
	for name, tc := range map[string]struct {
		spent, limit string
		want         int64
	}{
		"nothing spent":                 {spent: "0", limit: "2.50", want: 0},
		"just under 90%":                {spent: "2.249999999999", limit: "2.50", want: 89},
		"exactly 90%":                   {spent: "2.25", limit: "2.50", want: 90},
		"a third":                       {spent: "1", limit: "3", want: 33},
		"two thirds rounds down":        {spent: "2", limit: "3", want: 66},
		"all of it":                     {spent: "2.50", limit: "2.50", want: 100},
		"past it":                       {spent: "3.75", limit: "2.50", want: 150},
		"a trillionth of a trillion":    {spent: "0.000000000001", limit: "999999999999", want: 0},
		"a zero limit, nothing spent":   {spent: "0", limit: "0", want: 0},
		"a zero limit, something spent": {spent: "0.01", limit: "0", want: 100},
		"far past a tiny limit":         {spent: "999999999999", limit: "0.000000000001", want: math.MaxInt64},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cost.Percent(mustParse(t, tc.spent), mustParse(t, tc.limit)); got != tc.want {
				t.Errorf("Percent(%s, %s) = %d, want %d", tc.spent, tc.limit, got, tc.want)
			}
		})
	}
}

func TestPropertyPercentRoundsDown(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spent := amount().Draw(t, "spent")
		limit := amount().Draw(t, "limit")
		if !limit.IsPositive() || !spent.IsPositive() {
			t.Skip("Percent of a zero is decided, not computed")
		}
		got := cost.Percent(spent, limit)
		p, hundred := decimal.NewFromInt(got), spent.Mul(decimal.NewFromInt(100))
		// p is the whole percentage, p*limit <= 100*spent < (p+1)*limit, or saturated past it.
		if p.Mul(limit).GreaterThan(hundred) ||
			got < math.MaxInt64 && p.Add(decimal.NewFromInt(1)).Mul(limit).LessThanOrEqual(hundred) {
			t.Fatalf("Percent(%s, %s) = %d", cost.Format(spent), cost.Format(limit), got)
		}
		// A limit not passed is at most 100%, and one reached at least 100%.
		if fits := cost.Fits(spent, decimal.Zero, limit); fits && got > 100 || !fits && got < 100 {
			t.Fatalf("Percent(%s, %s) = %d, and Fits says %t", cost.Format(spent), cost.Format(limit), got, fits)
		}
	})
}

func TestTheLedgerBooksEveryCostRoundedUpToABillionth(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want int64
	}{
		{"a whole amount", "2.5", 2_500_000_000},
		{"a call's cost finer than a billionth is booked as the next billionth", "0.000000000075", 1},
		{"nothing costs nothing", "0", 0},
		{"an amount past what the ledger holds saturates", "999999999999.999999999999", math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := cost.Nanos(decimal.RequireFromString(c.in))
			if got != c.want {
				t.Fatalf("Nanos(%s) = %d, want %d", c.in, got, c.want)
			}
			if c.want < math.MaxInt64 && cost.FromNanos(got).LessThan(decimal.RequireFromString(c.in)) {
				t.Fatalf("booked %s for %s: less than was spent", cost.Format(cost.FromNanos(got)), c.in)
			}
		})
	}
}
