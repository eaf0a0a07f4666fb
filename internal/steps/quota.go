package steps

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/shopspring/decimal"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// quotaMeter holds a step's model calls to its namespace's caps: each call reserves its worst
// case in the ledger before it is made, and settles what it used once the model answered. What
// the calls settled waits here until the record that follows them books it (Take, Done). A
// step with no ledger (tests of the runner alone) is not held to any cap.
type quotaMeter struct {
	ledger    *ledger.Ledger
	caps      *quota.Caps
	namespace string
	clock     clock.PassiveClock

	// held, when set, is told of a call held at a cap: what the run's room is checked with
	// before its step goes on.
	held func(quota.Call)

	mu       sync.Mutex
	unbooked []transcript.Spend
}

// reserve reserves a call's worst case, or says why it is not made: a *workflow.QuotaHold when
// the run is to wait for room, a *workflow.ToolTrip when the call alone is more than a cap (the
// run ends), an error when the call cannot be counted against a cost cap (the step fails).
func (q *quotaMeter) reserve(ctx context.Context, call quota.Call) (*ledger.Reservation, error) {
	if q.ledger == nil {
		return nil, nil
	}
	r, v, err := q.ledger.Reserve(ctx, q.namespace, q.caps, call, q.clock.Now())
	switch {
	case err != nil:
		return nil, err
	case v.Outcome == quota.Held:
		if q.held != nil {
			q.held(call)
		}
		return nil, &workflow.QuotaHold{Quota: v.Quota, Message: v.Message, Until: v.Until}
	case v.Outcome == quota.Exceeded:
		return nil, &workflow.ToolTrip{Reason: v.Reason, Message: v.Message + ", so it was not made"}
	case v.Outcome == quota.Refused:
		return nil, errors.New(v.Message)
	}
	return r, nil
}

// settle ends a call's reservation with what it used, to be booked with the next record.
func (q *quotaMeter) settle(r *ledger.Reservation, tokens int64, spent decimal.Decimal) {
	if r == nil {
		return
	}
	s := r.Settle(tokens, spent)
	if ledger.Empty(s) {
		return
	}
	q.mu.Lock()
	q.unbooked = append(q.unbooked, s)
	q.mu.Unlock()
}

// Take hands the record about to be written what the step's calls settled since the last one.
func (q *quotaMeter) Take() []transcript.Spend {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.unbooked
	q.unbooked = nil
	return out
}

// Done is told whether the record that carried spend was stored: the ledger learns it was
// booked, or the next record carries it again.
func (q *quotaMeter) Done(spend []transcript.Spend, booked bool) {
	if len(spend) == 0 {
		return
	}
	if booked {
		q.ledger.Booked(q.namespace, spend)
		return
	}
	q.mu.Lock()
	q.unbooked = append(slices.Clone(spend), q.unbooked...)
	q.mu.Unlock()
}

// bookAlone books what no record will carry, for a step given up after its calls settled.
func (q *quotaMeter) bookAlone(ctx context.Context) error {
	spend := q.Take()
	if len(spend) == 0 || q.ledger == nil {
		return nil
	}
	return q.ledger.Book(ctx, q.namespace, spend)
}

// heldCall is a run's call held at a cap, by the run's UID.
type heldCall struct {
	uid  types.UID
	call quota.Call
}

// holding remembers the call of the run's step that was held at a cap.
func (s *Runner) holding(key types.NamespacedName, uid types.UID) func(quota.Call) {
	return func(c quota.Call) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.held == nil {
			s.held = map[types.NamespacedName]heldCall{}
		}
		s.held[key] = heldCall{uid: uid, call: c}
	}
}

// HeldCall is the worst case of the call a run's step was last held at a cap with, if this
// process held it: a held run goes on once its namespace has room for that call.
func (s *Runner) HeldCall(run *v1alpha1.AgentRun) (quota.Call, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[client.ObjectKeyFromObject(run)]
	if !ok || h.uid != run.UID {
		return quota.Call{}, false
	}
	return h.call, true
}
