package ledger_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

var now = time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)

func openStore(t *testing.T) transcript.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func capsOf(spec v1alpha1.AgentQuotaSpec) *quota.Caps {
	q := v1alpha1.AgentQuota{Spec: spec}
	q.Name = "team-a"
	c := quota.CapsOf([]v1alpha1.AgentQuota{q})
	return &c
}

// record is a step record of run uid carrying spend, as a step's goroutine writes it.
func record(uid string, step int32, spend ...transcript.Spend) transcript.Record {
	return transcript.Record{Key: transcript.Key{Kind: transcript.KindStep, Step: step}, RunUID: uid, Namespace: "team-a", Run: uid,
		Time: now, Body: json.RawMessage(`{}`), Spend: spend}
}

func usd(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// memStore books spend in memory, as the transcript store does in its transactions.
type memStore struct {
	mu     sync.Mutex
	booked map[string]transcript.Booked
}

func (m *memStore) Book(_ context.Context, namespace string, spend ...transcript.Spend) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.booked == nil {
		m.booked = map[string]transcript.Booked{}
	}
	for _, s := range spend {
		k := namespace + "/" + s.Day + "/" + s.Currency
		b := m.booked[k]
		b.Day, b.Currency, b.CostNanos, b.Tokens = s.Day, s.Currency, b.CostNanos+s.CostNanos, b.Tokens+s.Tokens
		m.booked[k] = b
	}
	return nil
}

func (m *memStore) Spent(_ context.Context, namespace, month string) ([]transcript.Booked, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []transcript.Booked
	for k, b := range m.booked {
		if strings.HasPrefix(k, namespace+"/"+month+"-") {
			out = append(out, b)
		}
	}
	return out, nil
}

func TestRacingRunsSpendNoMoreThanTheCapAndWhatTheirCallsUsedBeyondTheirReservations(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	l := ledger.New(store)
	caps := capsOf(v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("10")})
	const runs, callsEach = 200, 10
	var (
		wg         sync.WaitGroup
		beyond     atomic.Int64 // billionths the calls used past their reservations
		made, held atomic.Int64
	)
	for range runs {
		wg.Go(func() {
			for c := range callsEach {
				// Every call may cost up to 0.01; one in ten uses a little more than it
				// reserved, as a provider that overruns its output cap would.
				res, v, err := l.Reserve(ctx, "team-a", caps, quota.Call{Tokens: 100, Cost: usd("0.01"), Currency: "USD", Priced: true}, now)
				if err != nil {
					t.Error(err)
					return
				}
				if v.Outcome != quota.Allowed {
					held.Add(1)
					continue
				}
				used := usd("0.008")
				if c == 3 {
					used = usd("0.0125")
					beyond.Add(cost.Nanos(used.Sub(usd("0.01"))))
				}
				if err := l.Book(ctx, "team-a", []transcript.Spend{res.Settle(90, used)}); err != nil {
					t.Error(err)
					return
				}
				made.Add(1)
			}
		})
	}
	wg.Wait()
	spent, err := ledger.New(store).Spent(ctx, "team-a", "USD", now)
	if err != nil {
		t.Fatal(err)
	}
	over := spent.DayCost.Sub(usd("10"))
	t.Logf("%d runs racing on one cap of 10 USD: %d calls made, %d held; spent %s USD, %s past the cap; calls used %s past their reservations",
		runs, made.Load(), held.Load(), cost.Format(spent.DayCost), cost.Format(decimal.Max(over, decimal.Zero)), cost.Format(cost.FromNanos(beyond.Load())))
	if over.GreaterThan(cost.FromNanos(beyond.Load())) {
		t.Fatalf("the namespace spent %s past its cap, more than its calls used past their reservations (%s)", cost.Format(over), cost.Format(cost.FromNanos(beyond.Load())))
	}
	if held.Load() == 0 {
		t.Fatal("no call was held: the cap was never reached, and the race proves nothing")
	}
}

func TestAFreshOperatorReadsTheDaysSpendFromTheStore(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	caps := capsOf(v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](1000), MaxCostPerMonth: ptr.To("5")})
	first := ledger.New(store)
	res, v, err := first.Reserve(ctx, "team-a", caps, quota.Call{Tokens: 900, Cost: usd("1"), Currency: "USD", Priced: true}, now)
	if err != nil || v.Outcome != quota.Allowed {
		t.Fatalf("first call: %+v %v", v, err)
	}
	if _, err := store.Append(ctx, record("r1", 1, res.Settle(800, usd("0.5")))); err != nil {
		t.Fatal(err)
	}
	// The operator restarts; the run that spent it is deleted.
	if err := store.Delete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	again := ledger.New(store)
	_, v, err = again.Reserve(ctx, "team-a", caps, quota.Call{Tokens: 300, Cost: usd("0.1"), Currency: "USD", Priced: true}, now)
	if err != nil || v.Outcome != quota.Held || v.Until != time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("after a restart, a call past the day's tokens: %+v %v; want held until the next day", v, err)
	}
	// The next day, the day's tokens start again; the month's cost goes on.
	tomorrow := now.Add(2 * time.Minute)
	_, v, err = again.Reserve(ctx, "team-a", caps, quota.Call{Tokens: 300, Cost: usd("0.1"), Currency: "USD", Priced: true}, tomorrow)
	if err != nil || v.Outcome != quota.Allowed {
		t.Fatalf("the next day: %+v %v; want allowed", v, err)
	}
	spent, err := again.Spent(ctx, "team-a", "USD", tomorrow)
	if err != nil || spent.DayTokens != 0 || !spent.MonthCost.Equal(usd("0.5")) {
		t.Fatalf("spent the next day %+v (%v); want no tokens today and 0.5 this month", spent, err)
	}
}

func TestAHeldRunHasRoomOnceACallInFlightSettlesBelowItsReservation(t *testing.T) {
	ctx := context.Background()
	l := ledger.New(openStore(t))
	caps := capsOf(v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](1000)})
	call := quota.Call{Tokens: 600, Free: true}
	res, v, err := l.Reserve(ctx, "team-a", caps, call, now)
	if err != nil || v.Outcome != quota.Allowed {
		t.Fatalf("first call: %+v %v", v, err)
	}
	if v, _ := l.Room(ctx, "team-a", caps, call, now); v.Outcome != quota.Held {
		t.Fatalf("with 600 of 1000 reserved, a call of 600: %+v; want held", v)
	}
	res.Settle(100, decimal.Zero)
	if v, _ := l.Room(ctx, "team-a", caps, call, now); v.Outcome != quota.Allowed {
		t.Fatalf("after the call used 100: %+v; want room", v)
	}
	if v, _ := l.Room(ctx, "elsewhere", caps, quota.Call{Tokens: 1000, Free: true}, now); v.Outcome != quota.Allowed {
		t.Fatalf("another namespace's account: %+v; want room", v)
	}
}

func TestAStepGivenUpBooksWhatItsCallsUsed(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	l := ledger.New(store)
	res, _, err := l.Reserve(ctx, "team-a", nil, quota.Call{Tokens: 50, Cost: usd("0.2"), Currency: "USD", Priced: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Book(ctx, "team-a", []transcript.Spend{res.Settle(40, usd("0.15"))}); err != nil {
		t.Fatal(err)
	}
	spent, err := ledger.New(store).Spent(ctx, "team-a", "USD", now)
	if err != nil || spent.DayTokens != 40 || !spent.DayCost.Equal(usd("0.15")) {
		t.Fatalf("spent %+v (%v); want 40 tokens and 0.15", spent, err)
	}
}

// A model server can report any usage. What the ledger counts of it saturates, in memory as in
// the store, so that no sum wraps around to less than was spent and lifts a cap.
func TestCallsThatReportAbsurdUsageCannotLiftACap(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	call := quota.Call{Tokens: 100, Cost: usd("0.01"), Currency: "USD", Priced: true}
	most := cost.FromNanos(transcript.MaxSpend)

	t.Run("calls in flight that settle at once", func(t *testing.T) {
		l := ledger.New(store)
		caps := capsOf(v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("10")})
		var inFlight []*ledger.Reservation
		for range 2 {
			res, v, err := l.Reserve(ctx, "team-a", caps, call, now)
			if err != nil || v.Outcome != quota.Allowed {
				t.Fatalf("a call in flight: %+v %v", v, err)
			}
			inFlight = append(inFlight, res)
		}
		for _, res := range inFlight {
			res.Settle(1<<62, usd("9000000000000000000000"))
		}
		if _, v, err := l.Reserve(ctx, "team-a", caps, call, now); err != nil || v.Outcome != quota.Held {
			t.Errorf("the next call: %+v %v; want held", v, err)
		}
		if spent, err := l.Spent(ctx, "team-a", "USD", now); err != nil || !spent.DayCost.Equal(most) {
			t.Errorf("spent %+v (%v); want the day's cost at the most the ledger counts, %s", spent, err, cost.Format(most))
		}
	})

	t.Run("days booked at the most, read by a fresh operator", func(t *testing.T) {
		for i, day := range []string{"2026-11-26", "2026-11-27"} {
			spend := transcript.Spend{Day: day, Currency: "USD", CostNanos: transcript.MaxSpend, Tokens: transcript.MaxSpend}
			if _, err := store.Append(ctx, record("absurd", int32(i+1), spend)); err != nil {
				t.Fatal(err)
			}
		}
		caps := capsOf(v1alpha1.AgentQuotaSpec{MaxCostPerMonth: ptr.To("100"), MaxTokensPerMonth: ptr.To[int64](1_000_000)})
		l := ledger.New(store)
		if _, v, err := l.Reserve(ctx, "other", caps, call, now); err != nil || v.Outcome != quota.Allowed {
			t.Errorf("another namespace's call: %+v %v; want allowed", v, err)
		}
		if _, v, err := l.Reserve(ctx, "team-a", caps, call, now); err != nil || v.Outcome != quota.Held {
			t.Errorf("the next call: %+v %v; want held", v, err)
		}
		spent, err := l.Spent(ctx, "team-a", "USD", now)
		if err != nil || !spent.MonthCost.Equal(most) || spent.MonthTokens != transcript.MaxSpend {
			t.Errorf("spent %+v (%v); want the month's cost and tokens at the most the ledger counts", spent, err)
		}
	})
}

// BenchmarkACallsCheck is what the per-call check costs a step: a reservation against a
// namespace's caps and its settling, with the period loaded.
func BenchmarkACallsCheck(b *testing.B) {
	ctx := context.Background()
	l := ledger.New(&memStore{})
	caps := capsOf(v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](1 << 50), MaxCostPerDay: ptr.To("1000000")})
	call := quota.Call{Tokens: 1000, Cost: usd("0.001"), Currency: "USD", Priced: true}
	b.ReportAllocs()
	for b.Loop() {
		res, v, err := l.Reserve(ctx, "team-a", caps, call, now)
		if err != nil || v.Outcome != quota.Allowed {
			b.Fatal(v, err)
		}
		res.Settle(900, usd("0.0009"))
	}
}
