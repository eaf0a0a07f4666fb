package steps

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// noSpend is a ledger store that has booked nothing, and books nowhere.
type noSpend struct{ booked []transcript.Spend }

func (n *noSpend) Spent(context.Context, string, string) ([]transcript.Booked, error) {
	return nil, nil
}
func (n *noSpend) Book(_ context.Context, _ string, spend ...transcript.Spend) error {
	n.booked = append(n.booked, spend...)
	return nil
}

// cappedMeter meters a step's calls, priced at 1 (input) and 2 (output) per million tokens,
// under a namespace's caps.
func cappedMeter(t *testing.T, spec v1alpha1.AgentQuotaSpec, clk clock.PassiveClock) (*meter, *noSpend) {
	t.Helper()
	price, err := cost.NewPrice("1", "0.5", "2")
	if err != nil {
		t.Fatal(err)
	}
	q := v1alpha1.AgentQuota{Spec: spec}
	q.Name = "budget"
	caps := quota.CapsOf([]v1alpha1.AgentQuota{q})
	store := &noSpend{}
	return &meter{price: price, priced: true, currency: "USD", prompt: 1000, outputCap: 1000,
		quota: quotaMeter{ledger: ledger.New(store), caps: &caps, namespace: "team-a", clock: clk}}, store
}

func TestACallThatWouldPassTheNamespacesCapIsNotMadeAndHoldsTheRun(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	// Each call may cost up to 0.003: 1,000 prompt and 1,000 output tokens.
	m, _ := cappedMeter(t, v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("0.0045")}, clk)
	_, done, err := m.Call(context.Background(), nil)
	if err != nil {
		t.Fatalf("the first call fits the cap: %v", err)
	}
	reply := &agents.Reply{Tokens: 1500, InputTokens: 1000}
	done(reply, nil)
	if reply.Cost != "0.002" {
		t.Fatalf("the reply's cost %q, want 0.002", reply.Cost)
	}
	spend := m.quota.Take()
	if len(spend) != 1 || spend[0].CostNanos != 2_000_000 || spend[0].Tokens != 1500 || spend[0].Day != "2026-11-28" {
		t.Fatalf("spend to book %+v", spend)
	}
	// The record that was to carry it was not stored: the next one carries it again.
	m.quota.Done(spend, false)
	if again := m.quota.Take(); len(again) != 1 {
		t.Fatalf("spend of a record not stored was lost: %+v", again)
	}
	_, _, err = m.Call(context.Background(), nil)
	var hold *workflow.QuotaHold
	if !errors.As(err, &hold) || hold.Quota != "budget" || !hold.Until.Equal(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("the second call: %v; want a hold at quota budget until the next day", err)
	}
	if !strings.Contains(hold.Message, "0.002 of 0.0045 USD spent today (UTC), and the next model call could cost up to 0.003") {
		t.Fatalf("hold message %q", hold.Message)
	}
	// A provider that makes one call per step (HTTP, A2A) is not called, and its step's
	// result carries the hold.
	called := false
	res, err := agents.Metered(context.Background(), m, func(context.Context) (*workflow.Result, error) {
		called = true
		return &workflow.Result{}, nil
	})
	if err != nil || called || res.QuotaHold == nil || res.QuotaHold.Quota != "budget" {
		t.Fatalf("an HTTP agent's step at the cap: %+v %v (called %t); want its result to carry the hold, the agent not called", res, err, called)
	}
}

func TestACallTheNamespacesCapCannotHoldEndsTheRunOrFailsTheStep(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	m, _ := cappedMeter(t, v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("0.001")}, clk)
	_, _, err := m.Call(context.Background(), nil)
	var trip *workflow.ToolTrip
	if !errors.As(err, &trip) || trip.Reason != v1alpha1.ReasonCostBudgetExceeded || !strings.Contains(trip.Message, `quota "budget"`) {
		t.Fatalf("a call whose worst case alone passes the cap: %v; want a CostBudgetExceeded trip naming the quota", err)
	}
	m, _ = cappedMeter(t, v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("1")}, clk)
	m.priced = false
	if _, _, err := m.Call(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "the model has no price") {
		t.Fatalf("an unpriced call under a cost cap: %v; want it refused", err)
	}
	m, _ = cappedMeter(t, v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("1"), Currency: ptr.To("EUR")}, clk)
	if _, _, err := m.Call(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "in EUR, and the model is priced in USD") {
		t.Fatalf("a call in another currency: %v; want it refused", err)
	}
}

func TestAStepGivenUpBooksWhatItsCallsSettled(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	m, store := cappedMeter(t, v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](100000)}, clk)
	_, done, err := m.Call(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done(&agents.Reply{Tokens: 300}, nil)
	if err := m.quota.bookAlone(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(store.booked) != 1 || store.booked[0].Tokens != 300 || store.booked[0].CostNanos != decimal.RequireFromString("0.0006").Shift(9).IntPart() {
		t.Fatalf("booked %+v; want the call's 300 tokens and its cost", store.booked)
	}
}
