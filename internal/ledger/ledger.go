// Package ledger keeps what each namespace's model calls spend, so that its AgentQuotas' cost
// and token caps hold per call, whatever its runs' authors write or delete. A call reserves its
// worst case before it is made (package quota decides whether it may); once it answered, what
// it used is settled, in memory, and booked durably by the transcript store in the transaction
// of the record that follows the call (transcript.Record.Spend), on the UTC day and month the
// call was reserved. Deleting runs takes nothing back.
//
// The operator that runs steps keeps the namespaces' accounts: a namespace's day and month are
// read from the store the first time a cap needs them, and from then on every call of this
// operator adds to them as it settles. A call settled before that read and booked just after
// it may be counted twice until the period ends: the ledger errs on the side of the cap, never
// below what was spent.
package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/transcript"
)

// Store is where spend is booked and read back: the transcript store.
type Store interface {
	Spent(ctx context.Context, namespace, month string) ([]transcript.Booked, error)
	Book(ctx context.Context, namespace string, spend ...transcript.Spend) error
}

// Ledger is the namespaces' accounts. It is safe for concurrent use.
type Ledger struct {
	store Store

	mu       sync.Mutex
	accounts map[string]*account
}

// New is a ledger over store.
func New(store Store) *Ledger {
	return &Ledger{store: store, accounts: map[string]*account{}}
}

// account is one namespace's: by period (a UTC day or month), what its calls spent and what
// the calls in flight reserved.
type account struct {
	mu      sync.Mutex
	periods map[string]*totals
}

// totals are one period's.
type totals struct {
	// loaded is set once spent holds what the store had booked.
	loaded bool
	// spent is what was booked (read from the store) and settled since; unbooked the part of
	// what this operator settled that is not booked yet; reserved what calls in flight hold.
	spent, unbooked, reserved amounts
}

// amounts are tokens, and cost in billionths by currency.
type amounts struct {
	tokens int64
	nanos  map[string]int64
}

// add adds a call's or a booked row's amounts. Every sum saturates at transcript.MaxSpend, as
// the store's do, so that calls whose servers report absurd usage cannot make it wrap around
// to less than was spent.
func (a *amounts) add(currency string, nanos, tokens int64) {
	a.tokens = saturated(a.tokens, tokens)
	if nanos != 0 {
		if a.nanos == nil {
			a.nanos = map[string]int64{}
		}
		a.nanos[currency] = saturated(a.nanos[currency], nanos)
	}
}

func (a *amounts) sub(currency string, nanos, tokens int64) { a.add(currency, -nanos, -tokens) }

// none reports whether the amounts are nothing: no tokens, and no money in any currency (a
// currency whose calls all settled stays, at zero).
func (a amounts) none() bool {
	if a.tokens != 0 {
		return false
	}
	for _, n := range a.nanos {
		if n != 0 {
			return false
		}
	}
	return true
}

// saturated is a + b, held within ±transcript.MaxSpend.
func saturated(a, b int64) int64 {
	a, b = bounded(a), bounded(b)
	switch {
	case b > 0 && a > transcript.MaxSpend-b:
		return transcript.MaxSpend
	case b < 0 && a < -transcript.MaxSpend-b:
		return -transcript.MaxSpend
	}
	return a + b
}

// bounded is n held within ±transcript.MaxSpend.
func bounded(n int64) int64 { return min(max(n, -transcript.MaxSpend), transcript.MaxSpend) }

func (l *Ledger) account(namespace string) *account {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.accounts[namespace]
	if !ok {
		a = &account{periods: map[string]*totals{}}
		l.accounts[namespace] = a
	}
	return a
}

// period is the account's totals of a period, made empty and not loaded the first time. Periods
// other than now's day and month are dropped when nothing of theirs is in flight.
func (a *account) period(name string, now time.Time) *totals {
	t, ok := a.periods[name]
	if ok {
		return t
	}
	t = &totals{}
	a.periods[name] = t
	day, month := quota.Periods(now)
	for p, old := range a.periods {
		if p != day && p != month && old.reserved.none() && old.unbooked.none() {
			delete(a.periods, p)
		}
	}
	return t
}

// load reads from the store what the namespace booked on day and in month, if either is not
// loaded yet: the month's days, read at once.
func (l *Ledger) load(ctx context.Context, namespace string, a *account, day, month string) error {
	d, m := a.periods[day], a.periods[month]
	if d.loaded && m.loaded {
		return nil
	}
	booked, err := l.store.Spent(ctx, namespace, month)
	if err != nil {
		return fmt.Errorf("reading the namespace's spend from the ledger: %w", err)
	}
	for _, t := range []*totals{d, m} {
		if t.loaded {
			continue
		}
		t.spent = amounts{}
		t.spent.add("", 0, t.unbooked.tokens)
		for c, n := range t.unbooked.nanos {
			t.spent.add(c, n, 0)
		}
	}
	for _, b := range booked {
		if !m.loaded {
			m.spent.add(b.Currency, b.CostNanos, b.Tokens)
		}
		if !d.loaded && b.Day == day {
			d.spent.add(b.Currency, b.CostNanos, b.Tokens)
		}
	}
	d.loaded, m.loaded = true, true
	return nil
}

// spent is what the namespace spent and reserved in now's day and month, in currency, with the
// periods loaded.
func (a *account) spent(day, month, currency string, reserved bool) quota.Spent {
	d, m := a.periods[day], a.periods[month]
	s := quota.Spent{DayTokens: d.spent.tokens, MonthTokens: m.spent.tokens,
		DayCost: cost.FromNanos(d.spent.nanos[currency]), MonthCost: cost.FromNanos(m.spent.nanos[currency])}
	if reserved {
		s.DayTokens = saturated(s.DayTokens, d.reserved.tokens)
		s.MonthTokens = saturated(s.MonthTokens, m.reserved.tokens)
		s.DayCost = s.DayCost.Add(cost.FromNanos(d.reserved.nanos[currency]))
		s.MonthCost = s.MonthCost.Add(cost.FromNanos(m.reserved.nanos[currency]))
	}
	return s
}

// Spent is what the namespace's calls spent today and this month (UTC), cost in currency:
// booked, and settled by this operator. Calls in flight are not in it.
func (l *Ledger) Spent(ctx context.Context, namespace, currency string, now time.Time) (quota.Spent, error) {
	a := l.account(namespace)
	a.mu.Lock()
	defer a.mu.Unlock()
	day, month := quota.Periods(now)
	a.period(day, now)
	a.period(month, now)
	if err := l.load(ctx, namespace, a, day, month); err != nil {
		return quota.Spent{}, err
	}
	return a.spent(day, month, currency, false), nil
}

// Reserve decides a call against the namespace's caps, with what the namespace spent and the
// calls in flight reserved, and, if it may be made, reserves its worst case until it settles.
// Every call is reserved, capped or not: its reservation books it on the day and month it was
// made.
func (l *Ledger) Reserve(ctx context.Context, namespace string, caps *quota.Caps, call quota.Call, now time.Time) (*Reservation, quota.CallVerdict, error) {
	a := l.account(namespace)
	a.mu.Lock()
	defer a.mu.Unlock()
	day, month := quota.Periods(now)
	d, m := a.period(day, now), a.period(month, now)
	if caps != nil && caps.Spends() {
		if err := l.load(ctx, namespace, a, day, month); err != nil {
			return nil, quota.CallVerdict{}, err
		}
		if v := quota.CheckCall(caps, a.spent(day, month, caps.Currency, true), call, now); v.Outcome != quota.Allowed {
			return nil, v, nil
		}
	}
	r := &Reservation{l: l, account: a, namespace: namespace, day: day, month: month, currency: call.Currency, tokens: bounded(max(call.Tokens, 0))}
	if call.Priced && !call.Free {
		r.nanos = bounded(cost.Nanos(call.Cost))
	}
	for _, t := range []*totals{d, m} {
		t.reserved.add(r.currency, r.nanos, r.tokens)
	}
	return r, quota.CallVerdict{Outcome: quota.Allowed}, nil
}

// Room decides a call as Reserve would, without reserving it: whether a run held at a cap may
// go on.
func (l *Ledger) Room(ctx context.Context, namespace string, caps *quota.Caps, call quota.Call, now time.Time) (quota.CallVerdict, error) {
	if caps == nil || !caps.Spends() {
		return quota.CallVerdict{Outcome: quota.Allowed}, nil
	}
	a := l.account(namespace)
	a.mu.Lock()
	defer a.mu.Unlock()
	day, month := quota.Periods(now)
	a.period(day, now)
	a.period(month, now)
	if err := l.load(ctx, namespace, a, day, month); err != nil {
		return quota.CallVerdict{}, err
	}
	return quota.CheckCall(caps, a.spent(day, month, caps.Currency, true), call, now), nil
}

// Booked tells the ledger that the store booked these spends of the namespace.
func (l *Ledger) Booked(namespace string, spend []transcript.Spend) {
	if len(spend) == 0 {
		return
	}
	a := l.account(namespace)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range spend {
		for _, p := range []string{s.Day, monthOf(s.Day)} {
			if t, ok := a.periods[p]; ok {
				t.unbooked.sub(s.Currency, s.CostNanos, s.Tokens)
			}
		}
	}
}

// Book books spends that no record will carry (the step they belong to was given up) on their
// own.
func (l *Ledger) Book(ctx context.Context, namespace string, spend []transcript.Spend) error {
	if len(spend) == 0 {
		return nil
	}
	if err := l.store.Book(ctx, namespace, spend...); err != nil {
		return fmt.Errorf("booking the spend of a step given up: %w", err)
	}
	l.Booked(namespace, spend)
	return nil
}

// MaxCallTokens is the most tokens one call is counted for, as a step's answer is: a server
// that reports more is taken at this many.
const MaxCallTokens = 1 << 40

// Reservation is a call's worst case, held until the call settles.
type Reservation struct {
	l             *Ledger
	account       *account
	namespace     string
	day, month    string
	currency      string
	nanos, tokens int64
	done          bool
}

// release gives the reservation back; the caller holds the account's lock.
func (r *Reservation) release() {
	if r.done {
		return
	}
	r.done = true
	for _, p := range []string{r.day, r.month} {
		if t, ok := r.account.periods[p]; ok {
			t.reserved.sub(r.currency, r.nanos, r.tokens)
		}
	}
}

// Release gives back the reservation of a call that was not made, or used nothing. A nil
// reservation (a call no ledger meters) has nothing to give back.
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	r.account.mu.Lock()
	defer r.account.mu.Unlock()
	r.release()
}

// Settle ends the call's reservation with what it used (cost in the reservation's currency),
// and returns the spend to book with the record that follows the call. A call that used more
// than it reserved is counted whole: that is the only way the namespace passes a cap.
func (r *Reservation) Settle(tokens int64, spent decimal.Decimal) transcript.Spend {
	s := transcript.Spend{Day: r.day, Currency: r.currency, CostNanos: min(cost.Nanos(spent), transcript.MaxSpend),
		Tokens: min(max(tokens, 0), MaxCallTokens)}
	r.account.mu.Lock()
	defer r.account.mu.Unlock()
	r.release()
	for _, p := range []string{r.day, r.month} {
		t, ok := r.account.periods[p]
		if !ok {
			continue
		}
		t.unbooked.add(s.Currency, s.CostNanos, s.Tokens)
		if t.loaded {
			t.spent.add(s.Currency, s.CostNanos, s.Tokens)
		}
	}
	return s
}

// monthOf is the month of a day, as the ledger names both.
func monthOf(day string) string {
	if len(day) < len("2006-01") {
		return day
	}
	return day[:len("2006-01")]
}

// Empty reports whether a spend used nothing: it needs no booking.
func Empty(s transcript.Spend) bool { return s.Tokens == 0 && s.CostNanos == 0 }
