// Package quota decides what a namespace's AgentQuotas allow: whether a run may start, whether
// a model call may be made, what each run's limits are at most, and what each quota's status
// says. Its functions are pure, of the quotas, what the namespace uses (its runs, and the
// ledger's spend) and the time. A run over quota waits in phase Queued, in line by
// spec.priority (higher first), then creation time, then name, and starts when there is room;
// a started run whose next call would pass a cost or token cap waits Running.
package quota

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/textbound"
)

// Use is what a namespace's runs use against its quotas.
type Use struct {
	// Running are the runs past Pending and not yet ended, Queued ones excepted.
	Running int32
	// Queued are the runs waiting in line; Held the runs that started and wait at a cost or
	// token cap.
	Queued, Held int32
	// Spent is what the namespace's calls spent today and this month, from the ledger.
	Spent Spent
	// TranscriptBytes is what the namespace's transcripts take together.
	TranscriptBytes int64
}

// Active reports whether a run in phase p counts against maxRunningRuns.
func Active(p v1alpha1.RunPhase) bool {
	return p == v1alpha1.PhaseRunning || p == v1alpha1.PhaseAwaitingApproval || p == v1alpha1.PhaseAwaitingInput
}

// DayStart is the start of now's UTC day; the day's cost and tokens reset at the next one.
func DayStart(now time.Time) time.Time { return now.UTC().Truncate(24 * time.Hour) }

// Count counts the namespace's runs: admitted names runs this operator let start whose status
// does not say so yet. What they spent is the ledger's, not theirs: a run deleted takes none
// of it back.
func Count(runs []v1alpha1.AgentRun, admitted func(name string) bool) Use {
	var u Use
	for i := range runs {
		r := &runs[i]
		phase := r.Status.Phase
		switch {
		case phase.Terminal():
		case Active(phase) || admitted(r.Name):
			u.Running++
			if r.Status.QuotaHold != nil {
				u.Held++
			}
		case phase == v1alpha1.PhaseQueued:
			u.Queued++
		}
	}
	return u
}

// Waiting is a run in its namespace's line.
type Waiting struct {
	Name     string
	Priority int32
	Created  time.Time
}

// WaitingOf is the run as it stands in line.
func WaitingOf(r *v1alpha1.AgentRun) Waiting {
	w := Waiting{Name: r.Name, Created: r.CreationTimestamp.Time}
	if r.Spec.Priority != nil {
		w.Priority = *r.Spec.Priority
	}
	return w
}

// compare orders the line: higher priority first, then the earlier created, then by name.
func compare(a, b Waiting) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Line is the runs waiting, with run among them, in order.
func Line(waiting []Waiting, run Waiting) []Waiting {
	line := slices.DeleteFunc(slices.Clone(waiting), func(w Waiting) bool { return w.Name == run.Name })
	line = append(line, run)
	slices.SortFunc(line, compare)
	return line
}

// Verdict is whether a run may start, and if not, which quota holds it and why.
type Verdict struct {
	Admit bool
	// Reason is the Progressing reason of a run held: QuotaExceeded.
	Reason string
	// Message names the quota, the cap and the run's place in line.
	Message string
	// Place is the run's place in line, from 1, and Of the line's length.
	Place, Of int
}

// Decide says whether run may start now under quotas, given what the namespace uses and the
// runs waiting in line (run among them or not). Every quota must leave room: for
// maxRunningRuns, the run must be among the first in line that the free places allow; a cost or
// token cap reached holds every run until its period resets, and a full transcript budget until
// runs are deleted. Quotas that disagree hold every run until they agree.
func Decide(quotas []v1alpha1.AgentQuota, use Use, waiting []Waiting, run Waiting, now time.Time) Verdict {
	line := Line(waiting, run)
	place := slices.IndexFunc(line, func(w Waiting) bool { return w.Name == run.Name })
	held := func(why string) Verdict {
		return Verdict{Reason: v1alpha1.ReasonQuotaExceeded, Place: place + 1, Of: len(line),
			Message: fmt.Sprintf("%s; place %d of %d in line", why, place+1, len(line))}
	}
	if c := CapsOf(quotas); c.Conflict != "" {
		return held("the namespace's quotas disagree (" + c.Conflict + ")")
	}
	quotas = slices.Clone(quotas)
	slices.SortFunc(quotas, func(a, b v1alpha1.AgentQuota) int { return strings.Compare(a.Name, b.Name) })
	for i := range quotas {
		if full, why := holds(&quotas[i], use, place, now); full {
			return held(fmt.Sprintf("quota %q: %s", quotas[i].Name, why))
		}
	}
	return Verdict{Admit: true, Place: place + 1, Of: len(line)}
}

// holds says whether quota q holds back the run at place (from 0) in line, and why.
func holds(q *v1alpha1.AgentQuota, use Use, place int, now time.Time) (bool, string) {
	s := q.Spec
	if s.MaxRunningRuns != nil && int64(use.Running)+int64(place) >= int64(*s.MaxRunningRuns) {
		return true, fmt.Sprintf("%d of %d runs running", use.Running, *s.MaxRunningRuns)
	}
	day := DayStart(now).Add(24 * time.Hour).Format(time.RFC3339)
	month := MonthStart(now).AddDate(0, 1, 0).Format(time.RFC3339)
	for _, c := range []struct {
		cap          *string
		spent        decimal.Decimal
		period, next string
	}{{s.MaxCostPerDay, use.Spent.DayCost, "today (UTC); the day resets at ", day}, {s.MaxCostPerMonth, use.Spent.MonthCost, "this month (UTC); the month resets at ", month}} {
		if c.cap != nil {
			if limit := cost.Amount(*c.cap); c.spent.GreaterThanOrEqual(limit) {
				return true, fmt.Sprintf("%s of %s spent %s%s", cost.Format(c.spent), cost.Format(limit), c.period, c.next)
			}
		}
	}
	for _, c := range []struct {
		cap          *int64
		used         int64
		period, next string
	}{{s.MaxTokensPerDay, use.Spent.DayTokens, "today (UTC); the day resets at ", day}, {s.MaxTokensPerMonth, use.Spent.MonthTokens, "this month (UTC); the month resets at ", month}} {
		if c.cap != nil && c.used >= *c.cap {
			return true, fmt.Sprintf("%d of %d tokens used %s%s", c.used, *c.cap, c.period, c.next)
		}
	}
	if s.MaxTranscriptBytes != nil && use.TranscriptBytes >= *s.MaxTranscriptBytes {
		return true, fmt.Sprintf("the namespace's transcripts take %d of %d bytes; runs start again once runs are deleted", use.TranscriptBytes, *s.MaxTranscriptBytes)
	}
	return false, ""
}

// Status is quota q's status for what its namespace uses now, among quotas whose caps
// together are caps.
func Status(q *v1alpha1.AgentQuota, caps *Caps, use Use, now time.Time) v1alpha1.AgentQuotaStatus {
	reset := metav1.NewTime(DayStart(now).Add(24 * time.Hour))
	st := v1alpha1.AgentQuotaStatus{
		Running: use.Running, Queued: use.Queued, HeldRuns: use.Held,
		CostToday: cost.Format(use.Spent.DayCost), CostThisMonth: cost.Format(use.Spent.MonthCost), Currency: caps.Currency,
		TokensToday: use.Spent.DayTokens, TokensThisMonth: use.Spent.MonthTokens, TranscriptBytes: use.TranscriptBytes,
		ResetTime: &reset, ObservedGeneration: q.Generation, Conditions: slices.Clone(q.Status.Conditions),
	}
	c := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHasRoom, Message: "runs can start", ObservedGeneration: q.Generation}
	switch full, why := holds(q, use, 0, now); {
	case caps.Conflict != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonQuotaConflict,
			"the namespace's quotas disagree, and its runs wait until they agree: "+caps.Conflict
	case full:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonQuotaExceeded, why
	case use.Held > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonQuotaExceeded,
			fmt.Sprintf("%d runs wait at a cost or token cap, their next model calls not made", use.Held)
	}
	c.Message = textbound.BytesMarked(c.Message, 1024)
	c.LastTransitionTime = metav1.NewTime(now) // kept when the status does not change
	meta.SetStatusCondition(&st.Conditions, c)
	return st
}
