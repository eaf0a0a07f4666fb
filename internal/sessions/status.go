// Package sessions holds what a conversation is made of that needs no client: a session's
// status from its turns (when it ends, and why), what each turn may still use of the session's
// limits, and the history each turn is given within its bounds. The session controller
// gathers the facts and writes what these functions return.
package sessions

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

// Turn is what a session's status is made of, of one of its turns.
type Turn struct {
	Name    string
	UID     types.UID
	Number  int64
	Created time.Time
	Phase   v1alpha1.RunPhase
	// Ended is when the turn ended; zero while it has not.
	Ended  time.Time
	Tokens int64
	Cost   decimal.Decimal
	// State is the turn's status.state: for a StateMachine team, where its last transition led.
	State string
	// Started says the turn started (status.startTime): a turn that waited and ended without
	// starting is not one of the turns the session took.
	Started bool
	// Taint is the turn's status.taint, once untrusted content came into its context.
	Taint *v1alpha1.Taint
}

// Before says whether turn a comes before turn b: by number, then creation, then name.
func Before(a, b Turn) bool { return Compare(a, b) < 0 }

// Compare orders turns as Before does, for sorting.
func Compare(a, b Turn) int {
	return cmp.Or(cmp.Compare(a.Number, b.Number), a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
}

// Facts are what a session's status is computed from.
type Facts struct {
	Now     time.Time
	Session *v1alpha1.AgentSession
	// StateMachine says the session's team is a StateMachine: its next turn starts where the
	// last one's last transition led.
	StateMachine bool
	// Limits are the session's limits, bounded by its namespace's runLimits.
	Limits v1alpha1.SessionLimits
	Turns  []Turn
}

// Decision is what becomes of a session.
type Decision struct {
	Status v1alpha1.AgentSessionStatus
	// Ended says the session ends now, for an Event.
	Ended bool
	// Delete says the session's time to live after its last turn has passed.
	Delete bool
	// After is when to look again: when its time to live will have passed.
	After time.Duration
}

// maxEndMessage bounds endMessage, in bytes, as the API does.
const maxEndMessage = 1024

// Next is the session's status from its turns: counts, the last run, the state the next turn
// starts in, the phase, and whether it ends (by hand, or a limit reached) or goes (its time to
// live passed). An ended session never takes turns again.
func Next(f Facts) Decision {
	s := f.Session
	turns := slices.Clone(f.Turns)
	slices.SortFunc(turns, Compare)
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	used, settled := usage(&s.Status, turns)
	st.Turns, st.TokensUsed, st.Settled = used.Turns, used.Tokens, settled
	st.IdleSince, st.State = nil, ""
	atWork := ""
	for _, t := range turns {
		st.LastRun = t.Name
		switch {
		case !t.Phase.Terminal():
			if atWork == "" {
				atWork = t.Name
			}
		case !t.Ended.IsZero():
			st.State = nextState(f.StateMachine, t)
			if st.IdleSince == nil || st.IdleSince.Time.Before(t.Ended) {
				st.IdleSince = &metav1.Time{Time: t.Ended}
			}
		default: // ended with no completion time: it counts, but says nothing of when
			st.State = nextState(f.StateMachine, t)
		}
	}
	if atWork != "" {
		st.IdleSince = nil
	}
	st.Cost = cost.Format(used.Cost)
	st.Taint = TaintOf(&s.Status, turns, nil)
	d := Decision{}
	if st.Phase != v1alpha1.SessionEnded {
		if reason, msg := endOf(f, used); reason != "" {
			now := metav1.NewTime(f.Now)
			st.Phase, st.EndReason, st.EndMessage, st.EndTime = v1alpha1.SessionEnded, reason, bound(msg), &now
			d.Ended = true
		} else if atWork != "" {
			st.Phase = v1alpha1.SessionActive
		} else {
			st.Phase = v1alpha1.SessionIdle
		}
	}
	conditions(&st, atWork, f.Now)
	d.Status = st
	d.Delete, d.After = expiry(s.Spec.TTLSecondsAfterIdle, st.IdleSince, atWork != "", f.Now)
	return d
}

// nextState is where the turn after t starts: where t's last transition led, if t succeeded
// on a StateMachine team; the first state otherwise.
func nextState(stateMachine bool, t Turn) string {
	if !stateMachine || t.Phase != v1alpha1.PhaseSucceeded {
		return ""
	}
	return t.State
}

// endOf says why the session ends now, if it does: by hand (agents.baton.dev/end), or a limit
// reached. A limit ends it once its turns used it up; the turn at work when one runs out has
// ended by its own limit first, as each turn gets at most what is left.
func endOf(f Facts, used Usage) (string, string) {
	if why, ok := f.Session.Annotations[v1alpha1.AnnotationEnd]; ok {
		if why == "" {
			why = "ended by hand"
		}
		return v1alpha1.SessionReasonEnded, why
	}
	if reason, msg := Spent(f.Limits, used); reason != "" && (reason != v1alpha1.SessionReasonMaxTurns || !startedAtWork(f.Turns)) {
		return reason, msg
	}
	return "", ""
}

// Spent says which of a session's limits its turns used up, if any, and how: the session takes
// no turn after that.
func Spent(l v1alpha1.SessionLimits, used Usage) (string, string) {
	switch {
	case l.MaxTokens != nil && used.Tokens >= *l.MaxTokens:
		return string(v1alpha1.ReasonTokenBudgetExceeded), fmt.Sprintf("the session's turns used %d tokens of %d", used.Tokens, *l.MaxTokens)
	case l.MaxCost != nil && spentAll(used.Cost, cost.Amount(*l.MaxCost)):
		return string(v1alpha1.ReasonCostBudgetExceeded), fmt.Sprintf("the session's turns cost %s of %s", cost.Format(used.Cost), *l.MaxCost)
	case l.MaxTurns != nil && used.Started >= *l.MaxTurns:
		return v1alpha1.SessionReasonMaxTurns, fmt.Sprintf("the session took %d turns of %d", used.Started, *l.MaxTurns)
	}
	return "", ""
}

// spentAll says whether the turns spent the session's maxCost: past it, or all of it when it is
// more than nothing. A session whose maxCost is 0 takes turns that cost nothing, as a run with
// maxCost 0 makes calls that cost nothing.
func spentAll(total, maxCost decimal.Decimal) bool {
	return total.GreaterThan(maxCost) || (maxCost.IsPositive() && total.Equal(maxCost))
}

// startedAtWork says whether a turn that started has not ended.
func startedAtWork(turns []Turn) bool {
	for _, t := range turns {
		if t.Started && !t.Phase.Terminal() {
			return true
		}
	}
	return false
}

// conditions are the kstatus conditions: Ready while the session takes turns, Stalled once a
// limit ended it, Reconciling while a turn (atWork) is at work.
func conditions(st *v1alpha1.AgentSessionStatus, atWork string, now time.Time) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason,
			Message: bound(msg), ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now)})
	}
	if st.Phase == v1alpha1.SessionEnded {
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, st.EndReason, st.EndMessage)
		if st.EndReason == v1alpha1.SessionReasonEnded {
			set(v1alpha1.ConditionStalled, metav1.ConditionFalse, st.EndReason, "ended by hand")
		} else {
			set(v1alpha1.ConditionStalled, metav1.ConditionTrue, st.EndReason, st.EndMessage)
		}
	} else {
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonTakingTurns, fmt.Sprintf("%d turns taken", st.Turns))
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonTakingTurns, "")
	}
	if atWork != "" {
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, "TurnAtWork", "turn "+atWork+" is at work")
	} else {
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, "NoTurnAtWork", "")
	}
}

// expiry says whether an idle session's time to live has passed, or how long until it does.
func expiry(ttl *int32, idleSince *metav1.Time, atWork bool, now time.Time) (bool, time.Duration) {
	if ttl == nil || idleSince == nil || atWork {
		return false, 0
	}
	left := idleSince.Add(time.Duration(*ttl) * time.Second).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

func bound(s string) string {
	if len(s) <= maxEndMessage {
		return s
	}
	cut := maxEndMessage - 3
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > (1<<63-1)-b {
		return 1<<63 - 1
	}
	return a + b
}

// TaintOf is the taint of a session's conversation up to turn me (nil: all its turns): what its
// status keeps, or the first taint of its turns before me, in order. A session's taint is never
// dropped, even when the turn it came from is deleted; it says which turn it came from.
func TaintOf(st *v1alpha1.AgentSessionStatus, turns []Turn, me *Turn) *v1alpha1.Taint {
	if st.Taint != nil {
		return st.Taint.DeepCopy()
	}
	var first *Turn
	for i := range turns {
		t := &turns[i]
		if t.Taint == nil || me != nil && !Before(*t, *me) {
			continue
		}
		if first == nil || Before(*t, *first) {
			first = t
		}
	}
	if first == nil {
		return nil
	}
	return workflow.Inherited(first.Taint, "turn "+first.Name)
}
