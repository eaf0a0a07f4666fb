package ledger

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// A namespace's account keeps the periods it can still be asked about: today and this month,
// and a period with calls in flight. Days whose priced calls all settled and were booked go,
// however many days the operator runs.
func TestAnAccountForgetsThePeriodsThatEnded(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	l := New(store)
	start := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for day := range 60 {
		at := start.Add(time.Duration(day) * 24 * time.Hour)
		res, _, err := l.Reserve(ctx, "team-a", nil, quota.Call{Tokens: 10, Cost: decimal.RequireFromString("0.01"), Currency: "USD", Priced: true}, at)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Book(ctx, "team-a", []transcript.Spend{res.Settle(10, decimal.RequireFromString("0.01"))}); err != nil {
			t.Fatal(err)
		}
	}
	a := l.account("team-a")
	a.mu.Lock()
	kept := len(a.periods)
	a.mu.Unlock()
	if kept > 3 {
		t.Errorf("the account keeps %d periods after 60 days of priced calls; want today's, this month's and at most one more", kept)
	}
}
