package cost_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/cost"
)

func mustPrice(t testing.TB, input, cachedInput, output string) cost.Price {
	t.Helper()
	p, err := cost.NewPrice(input, cachedInput, output)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOfPricesACall(t *testing.T) {
	mini := mustPrice(t, "0.15", "0.075", "0.60")
	for name, tc := range map[string]struct {
		price cost.Price
		usage cost.Usage
		want  string
	}{
		"nothing":             {price: mini, usage: cost.Usage{}, want: "0"},
		"one input token":     {price: mini, usage: cost.Usage{Input: 1}, want: "0.00000015"},
		"one cached token":    {price: mini, usage: cost.Usage{Input: 1, CachedInput: 1}, want: "0.000000075"},
		"a typical call":      {price: mini, usage: cost.Usage{Input: 12_000, CachedInput: 8_000, Output: 700}, want: "0.00162"},
		"a million of each":   {price: mini, usage: cost.Usage{Input: 1_000_000, Output: 1_000_000}, want: "0.75"},
		"cached past input":   {price: mini, usage: cost.Usage{Input: 10, CachedInput: 50}, want: "0.00000075"},
		"negative counts":     {price: mini, usage: cost.Usage{Input: -5, CachedInput: -3, Output: -1}, want: "0"},
		"negative cached":     {price: mini, usage: cost.Usage{Input: 10, CachedInput: -3}, want: "0.0000015"},
		"a free model":        {price: mustPrice(t, "0", "", "0"), usage: cost.Usage{Input: 5000, Output: 5000}, want: "0"},
		"cached at the input": {price: mustPrice(t, "3", "", "15"), usage: cost.Usage{Input: 1000, CachedInput: 1000, Output: 100}, want: "0.0045"},
		"the cheapest price":  {price: mustPrice(t, "0.000001", "", "0"), usage: cost.Usage{Input: 1}, want: "0.000000000001"},
		"the dearest price":   {price: mustPrice(t, "999999.999999", "", "0"), usage: cost.Usage{Input: 1_000_000}, want: "999999.999999"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cost.Format(tc.price.Of(tc.usage)); got != tc.want {
				t.Errorf("Of(%+v) = %s, want %s", tc.usage, got, tc.want)
			}
		})
	}
}

func TestWorstIsEveryTokenAtFullPrice(t *testing.T) {
	mini := mustPrice(t, "0.15", "0.075", "0.60")
	if got := cost.Format(mini.Worst(10_000, 2_000)); got != "0.0027" {
		t.Errorf("Worst = %s, want 0.0027", got)
	}
	if got := cost.Format(mini.Worst(-1, -1)); got != "0" {
		t.Errorf("Worst of negatives = %s, want 0", got)
	}
	dearCache := mustPrice(t, "1", "2", "0")
	if got := cost.Format(dearCache.Worst(1_000_000, 0)); got != "2" {
		t.Errorf("Worst with a cache dearer than input = %s, want 2", got)
	}
}

func TestNewPriceNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		input, cached, output, want string
	}{
		"input":                      {input: "-1", output: "1", want: `input: "-1" has a sign`},
		"cached":                     {input: "1", cached: "1e-3", output: "1", want: "cachedInput: "},
		"output":                     {input: "1", output: "", want: "output: an amount is required"},
		"more than six digits after": {input: "0.0000001", output: "1", want: "input: \"0.0000001\" has 7 digits after the point, at most 6"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cost.NewPrice(tc.input, tc.cached, tc.output)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("NewPrice = %v, want an error starting %q", err, tc.want)
			}
		})
	}
	p := mustPrice(t, "0.15", "", "0.6")
	if !p.CachedInput.Equal(p.Input) {
		t.Errorf("an empty cachedInput priced cached tokens at %s, not the input's %s", p.CachedInput, p.Input)
	}
}

// micros draws a price as ParsePrice accepts it, in millionths.
func micros() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(0, 999_999_999_999),
		rapid.Int64Range(0, 100_000_000), // up to 100 a million tokens, as real prices are
		rapid.SampledFrom([]int64{0, 1, 75_000, 150_000, 600_000, 999_999_999_999}),
	)
}

// price draws a Price the way an endpoint declares one: through its strings.
func price(t *rapid.T) (cost.Price, [3]int64) {
	m := [3]int64{micros().Draw(t, "input"), micros().Draw(t, "cachedInput"), micros().Draw(t, "output")}
	s := func(v int64) string { return cost.Format(decimal.New(v, -6)) }
	p, err := cost.NewPrice(s(m[0]), s(m[1]), s(m[2]))
	if err != nil {
		t.Fatal(err)
	}
	return p, m
}

// usage draws a usage as providers report one: 0 <= CachedInput <= Input.
func usage(max int64) *rapid.Generator[cost.Usage] {
	return rapid.Custom(func(t *rapid.T) cost.Usage {
		in := rapid.Int64Range(0, max).Draw(t, "in")
		return cost.Usage{
			Input:       in,
			CachedInput: rapid.Int64Range(0, in).Draw(t, "cached"),
			Output:      rapid.Int64Range(0, max).Draw(t, "out"),
		}
	})
}

func TestPropertyOfIsAdditive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, _ := price(t)
		a, b := usage(1<<40).Draw(t, "a"), usage(1<<40).Draw(t, "b")
		if sum, whole := p.Of(a).Add(p.Of(b)), p.Of(a.Add(b)); !sum.Equal(whole) {
			t.Fatalf("Of(a) + Of(b) = %s, Of(a + b) = %s", cost.Format(sum), cost.Format(whole))
		}
	})
}

func TestPropertyOfIsMonotonic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, _ := price(t)
		u := usage(1<<40).Draw(t, "u")
		d := rapid.Int64Range(0, 1<<20).Draw(t, "d")
		more := func(name string, v cost.Usage) {
			if p.Of(v).LessThan(p.Of(u)) {
				t.Fatalf("%d more %s tokens cost less: %s < %s", d, name, p.Of(v), p.Of(u))
			}
		}
		more("input", cost.Usage{Input: u.Input + d, CachedInput: u.CachedInput, Output: u.Output})
		more("output", cost.Usage{Input: u.Input, CachedInput: u.CachedInput, Output: u.Output + d})
		more("input and cached", cost.Usage{Input: u.Input + d, CachedInput: u.CachedInput + d, Output: u.Output})
		// Serving d more of the same input from cache changes the cost by the prices' difference.
		cached := cost.Usage{Input: u.Input + d, CachedInput: u.CachedInput + d, Output: u.Output}
		uncached := cost.Usage{Input: u.Input + d, CachedInput: u.CachedInput, Output: u.Output}
		want := p.CachedInput.Sub(p.Input).Mul(decimal.NewFromInt(d)).Shift(-6)
		if got := p.Of(cached).Sub(p.Of(uncached)); !got.Equal(want) {
			t.Fatalf("%d tokens from cache changed the cost by %s, want %s", d, got, want)
		}
	})
}

func TestPropertyOfIsNeverNegativeAndAtMostWorst(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, _ := price(t)
		// Any counts at all, as a provider should never report them.
		odd := cost.Usage{Input: rapid.Int64().Draw(t, "in"), CachedInput: rapid.Int64().Draw(t, "cached"), Output: rapid.Int64().Draw(t, "out")}
		if c := p.Of(odd); c.IsNegative() {
			t.Fatalf("Of(%+v) = %s", odd, c)
		}
		if c, w := p.Of(odd), p.Worst(odd.Input, odd.Output); c.GreaterThan(w) {
			t.Fatalf("Of(%+v) = %s, more than Worst = %s", odd, c, w)
		}
		u := usage(math.MaxInt64).Draw(t, "u")
		if c, w := p.Of(u), p.Worst(u.Input, u.Output); c.GreaterThan(w) {
			t.Fatalf("Of(%+v) = %s, more than Worst = %s", u, c, w)
		}
	})
}

// units is what a call costs in 10^-12, by integer arithmetic: a price in millionths times
// tokens, over a million tokens.
func units(m [3]int64, u cost.Usage) *big.Int {
	term := func(price, tokens int64) *big.Int { return new(big.Int).Mul(big.NewInt(price), big.NewInt(tokens)) }
	sum := term(m[0], u.Input-u.CachedInput)
	sum.Add(sum, term(m[1], u.CachedInput))
	return sum.Add(sum, term(m[2], u.Output))
}

// fromUnits writes n 10^-12 as Format should, without the decimal package.
func fromUnits(n *big.Int) string {
	whole, frac := new(big.Int).QuoRem(n, big.NewInt(1_000_000_000_000), new(big.Int))
	f := strings.TrimRight(strings.Repeat("0", 12-len(frac.String()))+frac.String(), "0")
	if frac.Sign() == 0 {
		return whole.String()
	}
	return whole.String() + "." + f
}

func TestPropertySumsOfManyCostsAreExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		prices := make([]cost.Price, 8)
		millionths := make([][3]int64, 8)
		for i := range prices {
			prices[i], millionths[i] = price(t)
		}
		sum, want := decimal.Zero, new(big.Int)
		for range 10_000 {
			i := r.IntN(len(prices))
			in := r.Int64N(20_000)
			u := cost.Usage{Input: in, CachedInput: r.Int64N(in + 1), Output: r.Int64N(4_000)}
			sum = sum.Add(prices[i].Of(u))
			want.Add(want, units(millionths[i], u))
		}
		if got := cost.Format(sum); got != fromUnits(want) {
			t.Fatalf("the sum of 10,000 costs is %s, want %s", got, fromUnits(want))
		}
		if want.Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(24), nil)) < 0 {
			if back, err := cost.Parse(cost.Format(sum)); err != nil || !back.Equal(sum) {
				t.Fatalf("Parse(Format(%s)) = %s, %v", cost.Format(sum), back, err)
			}
		}
	})
}

func TestEstimateTokens(t *testing.T) {
	for name, tc := range map[string]struct {
		bytes    int64
		messages int
		want     int64
	}{
		"nothing":               {bytes: 0, messages: 0, want: 3},
		"an empty message":      {bytes: 0, messages: 1, want: 7},
		"one byte":              {bytes: 1, messages: 1, want: 8},
		"rounds up":             {bytes: 1001, messages: 2, want: 501 + 8 + 3},
		"a typical prompt":      {bytes: 40_000, messages: 12, want: 20_000 + 48 + 3},
		"negatives count as 0":  {bytes: -10, messages: -3, want: 3},
		"saturates on bytes":    {bytes: math.MaxInt64, messages: math.MaxInt, want: math.MaxInt64},
		"saturates on messages": {bytes: 0, messages: math.MaxInt, want: math.MaxInt64},
		"half of the largest":   {bytes: math.MaxInt64 - 1, messages: 0, want: math.MaxInt64/2 + 3},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cost.EstimateTokens(tc.bytes, tc.messages); got != tc.want {
				t.Errorf("EstimateTokens(%d, %d) = %d, want %d", tc.bytes, tc.messages, got, tc.want)
			}
		})
	}
}

func TestPropertyEstimateTokensGrowsWithItsInput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.Int64Range(0, math.MaxInt64).Draw(t, "bytes")
		m := rapid.IntRange(0, math.MaxInt).Draw(t, "messages")
		got := cost.EstimateTokens(b, m)
		if got < b/2 || got < 3 {
			t.Fatalf("EstimateTokens(%d, %d) = %d, under a token per 2 bytes", b, m, got)
		}
		if b < math.MaxInt64 && cost.EstimateTokens(b+1, m) < got {
			t.Fatalf("one more byte made the estimate smaller")
		}
		if m < math.MaxInt && cost.EstimateTokens(b, m+1) < got {
			t.Fatalf("one more message made the estimate smaller")
		}
	})
}
