// Package quota decides whether a namespace's AgentQuotas leave room for a run to start, and
// what each quota's status says: pure functions of the quotas, the namespace's runs and the
// time. A run over quota waits in phase Queued, in line by spec.priority (higher first), then
// creation time, then name, and starts when there is room.
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
)

// Use is what a namespace's runs use against its quotas.
type Use struct {
	// Running are the runs past Pending and not yet ended, Queued ones excepted.
	Running int32
	// Cost and Tokens are what the runs that started today (UTC) spent and used.
	Cost   decimal.Decimal
	Tokens int64
	// Queued are the runs waiting in line.
	Queued int32
}

// Active reports whether a run in phase p counts against maxRunningRuns.
func Active(p v1alpha1.RunPhase) bool {
	return p == v1alpha1.PhaseRunning || p == v1alpha1.PhaseAwaitingApproval || p == v1alpha1.PhaseAwaitingInput
}

// DayStart is the start of now's UTC day; the day's cost and tokens reset at the next one.
func DayStart(now time.Time) time.Time { return now.UTC().Truncate(24 * time.Hour) }

// Measure is what runs use: admitted names runs this operator let start whose status does not
// say so yet. A run's cost and tokens count on the UTC day it started.
func Measure(runs []v1alpha1.AgentRun, admitted func(name string) bool, now time.Time) Use {
	var u Use
	day := DayStart(now)
	for i := range runs {
		r := &runs[i]
		phase := r.Status.Phase
		switch {
		case phase.Terminal():
		case Active(phase) || admitted(r.Name):
			u.Running++
		case phase == v1alpha1.PhaseQueued:
			u.Queued++
		}
		if st := r.Status.StartTime; st != nil && !st.Time.Before(day) {
			u.Cost = u.Cost.Add(cost.Amount(r.Status.Cost))
			u.Tokens += r.Status.TokensUsed
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
// maxRunningRuns, the run must be among the first in line that the free places allow; a daily
// cap reached holds every run until the next UTC day.
func Decide(quotas []v1alpha1.AgentQuota, use Use, waiting []Waiting, run Waiting, now time.Time) Verdict {
	line := Line(waiting, run)
	place := slices.IndexFunc(line, func(w Waiting) bool { return w.Name == run.Name })
	quotas = slices.Clone(quotas)
	slices.SortFunc(quotas, func(a, b v1alpha1.AgentQuota) int { return strings.Compare(a.Name, b.Name) })
	for i := range quotas {
		if held, why := holds(&quotas[i], use, place, now); held {
			return Verdict{Reason: v1alpha1.ReasonQuotaExceeded, Place: place + 1, Of: len(line),
				Message: fmt.Sprintf("quota %q: %s; place %d of %d in line", quotas[i].Name, why, place+1, len(line))}
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
	reset := DayStart(now).Add(24 * time.Hour).Format(time.RFC3339)
	if s.MaxCostPerDay != nil {
		if limit := cost.Amount(*s.MaxCostPerDay); use.Cost.GreaterThanOrEqual(limit) {
			return true, fmt.Sprintf("%s of %s spent today (UTC); the day resets at %s", cost.Format(use.Cost), cost.Format(limit), reset)
		}
	}
	if s.MaxTokensPerDay != nil && use.Tokens >= *s.MaxTokensPerDay {
		return true, fmt.Sprintf("%d of %d tokens used today (UTC); the day resets at %s", use.Tokens, *s.MaxTokensPerDay, reset)
	}
	return false, ""
}

// Status is quota q's status for what its namespace uses now.
func Status(q *v1alpha1.AgentQuota, use Use, now time.Time) v1alpha1.AgentQuotaStatus {
	reset := metav1.NewTime(DayStart(now).Add(24 * time.Hour))
	st := v1alpha1.AgentQuotaStatus{
		Running: use.Running, Queued: use.Queued, CostToday: cost.Format(use.Cost), TokensToday: use.Tokens,
		ResetTime: &reset, ObservedGeneration: q.Generation, Conditions: slices.Clone(q.Status.Conditions),
	}
	c := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "HasRoom", Message: "runs can start", ObservedGeneration: q.Generation}
	if full, why := holds(q, use, 0, now); full {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonQuotaExceeded, why
	}
	c.LastTransitionTime = metav1.NewTime(now) // kept when the status does not change
	meta.SetStatusCondition(&st.Conditions, c)
	return st
}
