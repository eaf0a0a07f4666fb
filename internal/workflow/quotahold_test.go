package workflow

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestARunHeldAtItsNamespacesCapWaitsRunningAndTheTimeHeldDoesNotCount(t *testing.T) {
	p := mustPlan(t, team().Timeout(time.Hour))
	st := at(p, "worker")
	hold := &QuotaHold{Quota: "budget", Message: `quota "budget": 9 of 10 USD spent today (UTC)`, Until: t0.Add(15 * time.Hour)}
	d := Apply(p, st, StepResult{Agent: "worker", Result: Result{QuotaHold: hold}}, t0.Add(10*time.Minute))
	s := d.Status
	if s.Phase != v1alpha1.PhaseRunning || s.StepCount != st.StepCount || s.TokensUsed != st.TokensUsed {
		t.Fatalf("held run: phase %s, steps %d, tokens %d; want Running with nothing of the step counted", s.Phase, s.StepCount, s.TokensUsed)
	}
	if s.QuotaHold == nil || s.QuotaHold.Quota != "budget" || !s.QuotaHold.Since.Time.Equal(t0.Add(10*time.Minute)) || !s.QuotaHold.Until.Time.Equal(t0.Add(15*time.Hour)) {
		t.Fatalf("quotaHold %+v", s.QuotaHold)
	}
	c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionProgressing)
	if c == nil || c.Reason != v1alpha1.ReasonQuotaExceeded || !strings.Contains(c.Message, `step 2 of agent worker waits: quota "budget"`) {
		t.Fatalf("Progressing %+v", c)
	}
	if got := eventReasons(d); len(got) != 1 || got[0] != v1alpha1.ReasonQuotaExceeded {
		t.Fatalf("events %v; want one QuotaExceeded", got)
	}
	// Held for hours: the run's timeout of an hour does not trip, and it has no deadline.
	if _, ok := Deadline(p, &s); ok {
		t.Fatal("a held run has a deadline")
	}
	if _, tripped := Check(p, s, t0.Add(5*time.Hour)); tripped {
		t.Fatal("the run timed out while it was held")
	}
	// Held again at the same cap, once it found room and lost it: nothing changes.
	again := Apply(p, s, StepResult{Agent: "worker", Result: Result{QuotaHold: hold}}, t0.Add(20*time.Minute))
	if len(again.Events) != 0 || !again.Status.QuotaHold.Since.Equal(&s.QuotaHold.Since) {
		t.Fatalf("held again: events %v, since %v; want no Event and the hold as it was", again.Events, again.Status.QuotaHold.Since)
	}
	// Room at last, after 4h50m held: that time is waited, and the deadline moves back by it.
	s = ReleaseQuota(s, t0.Add(5*time.Hour)).Status
	if s.QuotaHold != nil || s.Waited.OrZero() != 4*time.Hour+50*time.Minute {
		t.Fatalf("released: hold %+v, waited %s", s.QuotaHold, s.Waited.OrZero())
	}
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionProgressing); c.Reason != string(v1alpha1.PhaseRunning) {
		t.Fatalf("Progressing after the release %+v", c)
	}
	if at, ok := Deadline(p, &s); !ok || !at.Equal(s.StartTime.Add(time.Hour+4*time.Hour+50*time.Minute)) {
		t.Fatalf("deadline %v (%t); want the timeout plus the time held", at, ok)
	}
	// A run that ends while held is no longer held, and the time counts as waited.
	held := Apply(p, at(p, "worker"), StepResult{Agent: "worker", Result: Result{QuotaHold: hold}}, t0)
	ended := Cancel(held.Status, "not needed", t0.Add(time.Hour))
	if ended.Status.QuotaHold != nil || ended.Status.Waited.OrZero() != time.Hour {
		t.Fatalf("cancelled while held: hold %+v, waited %s", ended.Status.QuotaHold, ended.Status.Waited.OrZero())
	}
}
