package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A run's events are derived from its status as the API server holds it, never written to it:
// from the status before a change and after it (Changes), and from the time a gate has waited
// (Due). Each event's ID is made from what it is of, so an event derived again (the operator
// restarted, and sees the run anew) has the same ID and the outbox stores it once.

// Facts are what a run's events are derived from.
type Facts struct {
	Namespace, Run, UID, Config string
	// Before is the run's status before the change; nil when the run is seen for the first time
	// (a restart), when every event of the last GiveUpAfter is derived again.
	Before *v1alpha1.AgentRunStatus
	After  v1alpha1.AgentRunStatus
	// Gates are the config's gates, as the run's pinned config has them.
	Gates []v1alpha1.ApprovalGate
	Now   time.Time
	// Console is the console's URL (--console-url), "" when none is set.
	Console string
}

// Changes are the events of a change of a run's status.
func Changes(f Facts) []Event {
	var out []Event
	if e, ok := gateOpened(f); ok {
		out = append(out, e)
	}
	out = append(out, gatesDecided(f)...)
	out = append(out, budgetWarnings(f)...)
	if e, ok := runEnded(f); ok {
		out = append(out, e)
	}
	return out
}

func (f Facts) event(t v1alpha1.NotifyEvent, of ...string) Event {
	h := sha256.New()
	for _, part := range append([]string{f.UID, string(t)}, of...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return Event{ID: hex.EncodeToString(h.Sum(nil))[:32], Type: t, Time: f.Now, Namespace: f.Namespace, Run: f.Run, RunUID: f.UID,
		Config: f.Config, URL: f.url("")}
}

// url links to the run's page in the console, at its gate when there is one.
func (f Facts) url(anchor string) string {
	if f.Console == "" {
		return ""
	}
	u := strings.TrimSuffix(f.Console, "/") + "/runs/" + url.PathEscape(f.Namespace) + "/" + url.PathEscape(f.Run)
	if anchor != "" {
		u += "#" + anchor
	}
	return u
}

// recent says whether t is within what a first look derives again.
func (f Facts) recent(t time.Time) bool { return f.Before != nil || f.Now.Sub(t) <= GiveUpAfter }

func (f Facts) gate(name string) (v1alpha1.ApprovalGate, bool) {
	for _, g := range f.Gates {
		if g.Name == name {
			return g, true
		}
	}
	return v1alpha1.ApprovalGate{Name: name}, false
}

// gateOpened: the run waits at a gate it did not wait at before.
func gateOpened(f Facts) (Event, bool) {
	p := f.After.PendingApproval
	if f.After.Phase != v1alpha1.PhaseAwaitingApproval || p == nil || !f.recent(p.Since.Time) {
		return Event{}, false
	}
	if f.Before != nil && samePending(f.Before.PendingApproval, p) {
		return Event{}, false
	}
	e := f.gateEvent(v1alpha1.NotifyGateOpened, p)
	e.Message = fmt.Sprintf("run %s waits at gate %s", f.Run, p.Gate)
	return e, true
}

// gateEvent is an event of the gate the run waits at: its deadline and what waits (a text a
// guardrail holds, a tool call; a step's output is read from the transcript by whoever sends
// it).
func (f Facts) gateEvent(t v1alpha1.NotifyEvent, p *v1alpha1.PendingApproval, of ...string) Event {
	e := f.event(t, append([]string{p.Gate, stamp(p.Since.Time)}, of...)...)
	e.Gate, e.URL = p.Gate, f.url("gate")
	if p.Expires != nil {
		d := p.Expires.Time
		e.Deadline = &d
	}
	switch {
	case p.Guard != nil:
		// What a guardrail holds for review: status's copy of it.
		e.Waiting = WaitingOutput(p.Guard.Text)
	case p.ToolCall != nil:
		c := p.ToolCall
		e.Waiting = WaitingCall(c.Server + "/" + c.Tool + " " + c.Arguments)
	}
	return e
}

// gatesDecided: each decision at a gate the status did not hold before.
func gatesDecided(f Facts) []Event {
	seen := map[string]bool{}
	if f.Before != nil {
		for _, a := range f.Before.Approvals {
			seen[decisionKey(a)] = true
		}
	}
	var out []Event
	for _, a := range f.After.Approvals {
		if seen[decisionKey(a)] || a.Decision == v1alpha1.RecordReplied || !f.recent(a.Time.Time) {
			continue
		}
		e := f.event(v1alpha1.NotifyGateDecided, decisionKey(a))
		e.Gate, e.Decision, e.Reason = a.Gate, a.Decision, "by "+a.By
		e.Message = fmt.Sprintf("gate %s of run %s: %s by %s", a.Gate, f.Run, a.Decision, a.By)
		out = append(out, e)
	}
	return out
}

func decisionKey(a v1alpha1.ApprovalRecord) string {
	return strings.Join([]string{a.Gate, a.Decision, a.By, stamp(a.Time.Time), strconv.Itoa(int(a.Step)), strconv.Itoa(int(a.ToolCall))}, "/")
}

// budgetWarnings: a budget warning the status did not hold before.
func budgetWarnings(f Facts) []Event {
	var out []Event
	for _, t := range []string{v1alpha1.ConditionTokenBudgetWarning, v1alpha1.ConditionCostBudgetWarning} {
		c := meta.FindStatusCondition(f.After.Conditions, t)
		if c == nil || c.Status != "True" || !f.recent(c.LastTransitionTime.Time) {
			continue
		}
		if f.Before != nil && meta.IsStatusConditionTrue(f.Before.Conditions, t) {
			continue
		}
		e := f.event(v1alpha1.NotifyBudgetWarning, t)
		e.Decision, e.Message = t, c.Message
		out = append(out, e)
	}
	return out
}

// runEnded: the run ended.
func runEnded(f Facts) (Event, bool) {
	st := f.After
	if !st.Phase.Terminal() || f.Before != nil && f.Before.Phase.Terminal() {
		return Event{}, false
	}
	if f.Before == nil && (st.CompletionTime == nil || !f.recent(st.CompletionTime.Time)) {
		return Event{}, false
	}
	e := f.event(v1alpha1.NotifyRunEnded)
	e.Decision, e.Reason, e.Message = string(st.Phase), string(st.TerminationReason), st.TerminationMessage
	return e, true
}

// Due are the reminders and the escalation of the gate the run waits at that are due now, and
// when the next is; zero when none is to come. A reminder that came due while nobody looked is
// sent once, as the latest.
func Due(f Facts) ([]Event, time.Time) {
	p := f.After.PendingApproval
	if f.After.Phase != v1alpha1.PhaseAwaitingApproval || p == nil {
		return nil, time.Time{}
	}
	g, ok := f.gate(p.Gate)
	if !ok {
		return nil, time.Time{}
	}
	var out []Event
	var next time.Time
	waited := f.Now.Sub(p.Since.Time)
	if esc := g.Escalate; esc != nil {
		after := esc.After.OrZero()
		if waited >= after {
			e := f.gateEvent(v1alpha1.NotifyGateEscalated, p)
			to := esc.To
			e.Deciders = &to
			e.Message = fmt.Sprintf("run %s has waited at gate %s for %s", f.Run, p.Gate, after)
			out = append(out, e)
		} else {
			next = p.Since.Add(after)
		}
	}
	if r := g.Remind; r != nil && r.Every.OrZero() > 0 {
		every := r.Every.OrZero()
		if n := int64(waited / every); n > 0 {
			e := f.gateEvent(v1alpha1.NotifyGateReminder, p, strconv.FormatInt(n, 10))
			e.Message = fmt.Sprintf("run %s still waits at gate %s, after %s", f.Run, p.Gate, time.Duration(n)*every)
			if esc := g.Escalate; esc != nil && waited >= esc.After.OrZero() {
				to := esc.To
				e.Deciders = &to
			}
			out = append(out, e)
		}
		at := p.Since.Add(time.Duration(int64(waited/every)+1) * every)
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return out, next
}

func stamp(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// Relevant says whether a change of a run's status can make an event: a phase, a gate, a
// decision or a budget warning changed. The steps between them make none, and a notifier need
// not look at them.
func Relevant(before, after *v1alpha1.AgentRunStatus) bool {
	if before.Phase != after.Phase || !samePending(before.PendingApproval, after.PendingApproval) {
		return true
	}
	if len(before.Approvals) != len(after.Approvals) ||
		len(after.Approvals) > 0 && decisionKey(before.Approvals[len(before.Approvals)-1]) != decisionKey(after.Approvals[len(after.Approvals)-1]) {
		return true
	}
	for _, t := range []string{v1alpha1.ConditionTokenBudgetWarning, v1alpha1.ConditionCostBudgetWarning} {
		if meta.IsStatusConditionTrue(before.Conditions, t) != meta.IsStatusConditionTrue(after.Conditions, t) {
			return true
		}
	}
	return false
}

func samePending(a, b *v1alpha1.PendingApproval) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Gate == b.Gate && a.Since.Equal(&b.Since)
}
