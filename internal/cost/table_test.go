package cost_test

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/cost"
)

func TestNewTableReadsAnEndpointsPrices(t *testing.T) {
	table, err := cost.NewTable("USD", []cost.ModelPrice{
		{Model: "gpt-4o-mini", Input: "0.15", CachedInput: "0.075", Output: "0.60"},
		{Model: "gpt-4o", Input: "2.50", Output: "10"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Currency(); got != "USD" {
		t.Errorf("Currency = %q, want USD", got)
	}
	mini, ok := table.For("gpt-4o-mini")
	if !ok {
		t.Fatal("gpt-4o-mini has no price")
	}
	if got := cost.Format(mini.Of(cost.Usage{Input: 2_000_000, CachedInput: 1_000_000, Output: 1_000_000})); got != "0.825" {
		t.Errorf("gpt-4o-mini's call costs %s, want 0.825", got)
	}
	full, _ := table.For("gpt-4o")
	if !full.CachedInput.Equal(full.Input) {
		t.Errorf("gpt-4o's cached input costs %s, want its input price %s", full.CachedInput, full.Input)
	}
	for _, model := range []string{"gpt-4o-mini-2024-07-18", "GPT-4o", "", "gpt-4"} {
		if _, ok := table.For(model); ok {
			t.Errorf("%q has a price; only exact names have", model)
		}
	}
	if _, ok := (cost.Table{}).For("gpt-4o"); ok {
		t.Error("the zero Table priced a model")
	}
}

func TestNewTableNamesTheEntry(t *testing.T) {
	ok := cost.ModelPrice{Model: "a", Input: "1", Output: "2"}
	for name, tc := range map[string]struct {
		currency string
		prices   []cost.ModelPrice
		want     string
	}{
		"no currency":        {currency: "", want: `currency: "" is not an ISO 4217 code`},
		"a currency's name":  {currency: "dollar", want: `currency: "dollar" is not`},
		"lower case":         {currency: "usd", want: "currency: "},
		"a sign":             {currency: "$", want: "currency: "},
		"no model":           {currency: "EUR", prices: []cost.ModelPrice{ok, {Input: "1", Output: "1"}}, want: "prices[1].model: a model name is required"},
		"a model twice":      {currency: "EUR", prices: []cost.ModelPrice{ok, {Model: "b", Input: "1", Output: "1"}, ok}, want: `prices[2].model: "a" is priced already by prices[0]`},
		"a bad input":        {currency: "EUR", prices: []cost.ModelPrice{{Model: "a", Input: "1.", Output: "1"}}, want: `prices[0].input: "1." has no digit after the point`},
		"a bad cached input": {currency: "EUR", prices: []cost.ModelPrice{ok, {Model: "b", Input: "1", Output: "1"}, {Model: "c", Input: "1", CachedInput: "-0.5", Output: "1"}}, want: "prices[2].cachedInput: "},
		"a bad output":       {currency: "EUR", prices: []cost.ModelPrice{ok, {Model: "b", Input: "1", Output: "0,60"}}, want: "prices[1].output: "},
		"a missing output":   {currency: "EUR", prices: []cost.ModelPrice{{Model: "a", Input: "1"}}, want: "prices[0].output: an amount is required"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cost.NewTable(tc.currency, tc.prices)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("NewTable = %v, want an error starting %q", err, tc.want)
			}
		})
	}
}

func TestNewTableMayPriceNothing(t *testing.T) {
	table, err := cost.NewTable("JPY", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := table.For("any"); ok {
		t.Error("an empty table priced a model")
	}
}

func TestCurrencyPatternAgreesWithNewTable(t *testing.T) {
	re := regexp.MustCompile(cost.CurrencyPattern)
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.StringOfN(rapid.RuneFrom([]rune("ABCUSDEURxyz1 $\n")), 0, 5, -1).Draw(t, "currency")
		_, err := cost.NewTable(c, nil)
		if re.MatchString(c) != (err == nil) {
			t.Fatalf("%q: pattern matches %t, NewTable says %v", c, re.MatchString(c), err)
		}
	})
}
