package cost

import (
	"fmt"
	"regexp"
)

// CurrencyPattern is a regular expression that accepts exactly the currencies NewTable accepts:
// an ISO 4217 code, three capital letters.
const CurrencyPattern = `^[A-Z]{3}$`

var currencyRE = regexp.MustCompile(CurrencyPattern)

// ModelPrice is one entry of an endpoint's prices as the API keeps it: each price a decimal
// string per million tokens, as ParsePrice reads it.
type ModelPrice struct {
	// Model is the model's name as the endpoint's API names it.
	Model string
	// Input is the price of a prompt token.
	Input string
	// CachedInput is the price of a prompt token served from cache; empty means Input's.
	CachedInput string
	// Output is the price of a completion token.
	Output string
}

// Table is an endpoint's prices by model name, and the currency they are in. Its zero value
// prices no model.
type Table struct {
	currency string
	prices   map[string]Price
}

// NewTable reads an endpoint's currency and prices. Each error names what it refuses as the
// API does ("currency: ...", "prices[2].output: ..."); a model priced twice is refused, since
// either price would be a guess. An endpoint may price no model.
func NewTable(currency string, prices []ModelPrice) (Table, error) {
	if !currencyRE.MatchString(currency) {
		return Table{}, fmt.Errorf("currency: %s is not an ISO 4217 code, three capital letters such as USD", quote(currency))
	}
	t := Table{currency: currency, prices: make(map[string]Price, len(prices))}
	first := make(map[string]int, len(prices))
	for i, mp := range prices {
		if mp.Model == "" {
			return Table{}, fmt.Errorf("prices[%d].model: a model name is required", i)
		}
		if j, ok := first[mp.Model]; ok {
			return Table{}, fmt.Errorf("prices[%d].model: %s is priced already by prices[%d]", i, quote(mp.Model), j)
		}
		p, err := NewPrice(mp.Input, mp.CachedInput, mp.Output)
		if err != nil {
			return Table{}, fmt.Errorf("prices[%d].%w", i, err)
		}
		first[mp.Model] = i
		t.prices[mp.Model] = p
	}
	return t, nil
}

// For is the price of model, and whether the table has one. The name must match exactly: a
// price for "gpt-4o" is not a price for "gpt-4o-mini" or a dated snapshot of it.
func (t Table) For(model string) (Price, bool) {
	p, ok := t.prices[model]
	return p, ok
}

// Currency is the ISO 4217 code the table's prices, and so the costs of its calls, are in.
func (t Table) Currency() string {
	return t.currency
}
