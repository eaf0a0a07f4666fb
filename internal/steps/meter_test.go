package steps

import (
	"errors"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

// pricedMeter meters calls at 1 (input) and 2 (output) per million tokens, under a budget.
func pricedMeter(t *testing.T, spent, limit string, outputCap int64) *meter {
	t.Helper()
	price, err := cost.NewPrice("1", "0.5", "2")
	if err != nil {
		t.Fatal(err)
	}
	return &meter{price: price, priced: true, currency: "USD", spent: decimal.RequireFromString(spent),
		limit: decimal.RequireFromString(limit), limited: true, outputCap: outputCap}
}

func reserveFor(t *testing.T, output int64) wrapUpReserve {
	t.Helper()
	price, err := cost.NewPrice("1", "0.5", "2")
	if err != nil {
		t.Fatal(err)
	}
	return wrapUpReserve{agent: "writer", price: price, output: output}
}

func TestACallThatWouldEatTheWrapUpReserveIsNotMade(t *testing.T) {
	// A call of 1,000 prompt and 1,000 output tokens costs at most 0.003; the wrap-up turn of
	// 2,000 prompt and 1,000 output tokens at most 0.004.
	m := pricedMeter(t, "0", "0.0065", 1000)
	if err := m.affordable(1000); err != nil {
		t.Fatalf("without a reserve the call fits the budget: %v", err)
	}
	m.reserve = reserveFor(t, 1000)
	err := m.affordable(1000)
	var trip *workflow.ToolTrip
	if !errors.As(err, &trip) || trip.Reason != v1alpha1.ReasonCostBudgetExceeded {
		t.Fatalf("with the reserve: %v, want a CostBudgetExceeded trip", err)
	}
	if !strings.Contains(trip.Message, "0.004 is kept for writer's wrap-up turn") {
		t.Errorf("message %q does not say what is kept for whom", trip.Message)
	}
	m.limit = decimal.RequireFromString("0.007")
	if err := m.affordable(1000); err != nil {
		t.Fatalf("a budget that holds the call and the reserve: %v", err)
	}
}

func TestTheOutputCapLeavesTheWrapUpReserve(t *testing.T) {
	m := pricedMeter(t, "0", "0.01", 0)
	m.prompt = 1000
	m.reserve = reserveFor(t, 1000)
	model := v1alpha1.ModelSpec{}
	m.capOutput(&model)
	if model.MaxOutputTokens == nil {
		t.Fatal("no cap set under a budget")
	}
	// The capped call and the reserve for a prompt that holds its answer fit the budget.
	out := int64(*model.MaxOutputTokens)
	total := m.price.Worst(m.prompt, out).Add(m.reserve.of(m.prompt + out))
	if total.GreaterThan(m.limit) {
		t.Fatalf("cap %d: the call and the reserve cost up to %s, past the budget %s", out, total, m.limit)
	}
	if err := m.affordable(m.prompt); err != nil {
		t.Fatalf("the capped call is refused: %v", err)
	}
	// One more token would not fit.
	over := m.price.Worst(m.prompt, out+1).Add(m.reserve.of(m.prompt + out + 1))
	if !over.GreaterThan(m.limit) {
		t.Errorf("cap %d is lower than the budget allows (%s with one more token)", out, over)
	}
}

func TestAStepHeldAtAToolGateCostsWhatItsCallsCostBeforeAndAfter(t *testing.T) {
	m := pricedMeter(t, "0.5", "1", 100)
	m.cost = decimal.RequireFromString("0.002") // the calls made since the gate passed
	// The calls before the gate cost 0.003, counted in the run's status when it was held.
	res := workflow.Result{CountedCost: "0.003"}
	m.result(&res)
	if res.Cost != "0.005" || res.Currency != "USD" {
		t.Errorf("cost %q %s, want the whole step's 0.005 USD (the core adds 0.002 of it)", res.Cost, res.Currency)
	}
}
