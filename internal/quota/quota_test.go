package quota

import (
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

var now = time.Date(2026, 11, 25, 15, 30, 0, 0, time.UTC)

func quotaOf(name string, spec v1alpha1.AgentQuotaSpec) v1alpha1.AgentQuota {
	q := v1alpha1.AgentQuota{Spec: spec}
	q.Name = name
	return q
}

func run(name string, phase v1alpha1.RunPhase, started time.Time, cost string, tokens int64) v1alpha1.AgentRun {
	r := v1alpha1.AgentRun{}
	r.Name = name
	r.Status.Phase, r.Status.Cost, r.Status.TokensUsed = phase, cost, tokens
	if !started.IsZero() {
		t := metav1.NewMicroTime(started)
		r.Status.StartTime = &t
	}
	return r
}

func TestMeasureCountsRunningRunsAndTodaysSpending(t *testing.T) {
	yesterday := now.Add(-24 * time.Hour)
	runs := []v1alpha1.AgentRun{
		run("a", v1alpha1.PhaseRunning, now.Add(-time.Hour), "1.5", 100),
		run("b", v1alpha1.PhaseAwaitingApproval, now.Add(-time.Minute), "0.25", 10),
		run("c", v1alpha1.PhaseAwaitingInput, yesterday, "9", 900),
		run("d", v1alpha1.PhaseSucceeded, now.Add(-2*time.Hour), "2", 200),
		run("e", v1alpha1.PhaseQueued, time.Time{}, "", 0),
		run("f", v1alpha1.PhasePending, time.Time{}, "", 0),
	}
	u := Measure(runs, func(name string) bool { return name == "f" }, now)
	if u.Running != 4 || u.Queued != 1 {
		t.Errorf("running %d queued %d; want 4 (three at work, one admitted) and 1", u.Running, u.Queued)
	}
	if !u.Cost.Equal(decimal.RequireFromString("3.75")) || u.Tokens != 310 {
		t.Errorf("today: cost %s tokens %d; want 3.75 and 310 (yesterday's run not counted)", u.Cost, u.Tokens)
	}
}

func TestRunsStartInPriorityThenCreationOrderAsPlacesFree(t *testing.T) {
	q := []v1alpha1.AgentQuota{quotaOf("team-a", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](3)})}
	old, young := now.Add(-time.Hour), now
	line := []Waiting{{Name: "low-old", Created: old}, {Name: "high-young", Priority: 10, Created: young}, {Name: "low-young", Created: young}}
	use := Use{Running: 2}
	// One place is free: the high-priority run has it, the others wait in order.
	if v := Decide(q, use, line, line[1], now); !v.Admit {
		t.Fatalf("the first in line was held: %+v", v)
	}
	v := Decide(q, use, line, line[0], now)
	if v.Admit || v.Place != 2 || v.Of != 3 || v.Reason != v1alpha1.ReasonQuotaExceeded {
		t.Fatalf("the second in line: %+v; want held, place 2 of 3", v)
	}
	if v.Message != `quota "team-a": 2 of 3 runs running; place 2 of 3 in line` {
		t.Errorf("message %q", v.Message)
	}
	// A new run not yet in line joins it at its place.
	newcomer := Waiting{Name: "newest", Priority: 5, Created: now.Add(time.Minute)}
	if v := Decide(q, use, line, newcomer, now); v.Admit || v.Place != 2 || v.Of != 4 {
		t.Errorf("a newcomer of priority 5: %+v; want place 2 of 4", v)
	}
	if v := Decide(q, Use{Running: 0}, line, line[2], now); !v.Admit {
		t.Errorf("with three places free the third in line starts: %+v", v)
	}
}

func TestADailyCapHoldsEveryRunUntilTheNextUTCDay(t *testing.T) {
	q := []v1alpha1.AgentQuota{
		quotaOf("runs", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](100)}),
		quotaOf("money", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("12.00"), MaxTokensPerDay: ptr.To[int64](1000)}),
	}
	me := Waiting{Name: "r", Created: now}
	if v := Decide(q, Use{Cost: decimal.RequireFromString("11.99"), Tokens: 999}, nil, me, now); !v.Admit {
		t.Fatalf("under both caps: %+v", v)
	}
	v := Decide(q, Use{Cost: decimal.RequireFromString("12")}, nil, me, now)
	if v.Admit || !strings.Contains(v.Message, `quota "money": 12 of 12 spent today (UTC); the day resets at 2026-11-26T00:00:00Z`) {
		t.Fatalf("at the cost cap: %+v", v)
	}
	v = Decide(q, Use{Tokens: 1000}, nil, me, now)
	if v.Admit || !strings.Contains(v.Message, "1000 of 1000 tokens used today") {
		t.Fatalf("at the token cap: %+v", v)
	}
}

func TestStatusShowsUseTheResetAndWhetherThereIsRoom(t *testing.T) {
	q := quotaOf("team-a", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](2)})
	q.Generation = 3
	st := Status(&q, Use{Running: 2, Queued: 5, Cost: decimal.RequireFromString("1.5"), Tokens: 42}, now)
	if st.Running != 2 || st.Queued != 5 || st.CostToday != "1.5" || st.TokensToday != 42 || st.ObservedGeneration != 3 {
		t.Errorf("status %+v", st)
	}
	if !st.ResetTime.Time.Equal(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("reset %s, want the next UTC midnight", st.ResetTime)
	}
	if c := st.Conditions[0]; c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonQuotaExceeded || c.Message != "2 of 2 runs running" {
		t.Errorf("condition %+v; want Ready False QuotaExceeded", c)
	}
	q.Status = st
	st = Status(&q, Use{Running: 1}, now.Add(time.Minute))
	if c := st.Conditions[0]; c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now.Add(time.Minute)) {
		t.Errorf("condition %+v; want Ready True since the change", c)
	}
}
