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

func TestCountCountsRunsAtWorkInLineAndHeldAtACap(t *testing.T) {
	yesterday := now.Add(-24 * time.Hour)
	held := run("h", v1alpha1.PhaseRunning, now.Add(-time.Hour), "1", 10)
	held.Status.QuotaHold = &v1alpha1.QuotaHold{Quota: "money", Since: metav1.NewMicroTime(now)}
	runs := []v1alpha1.AgentRun{
		run("a", v1alpha1.PhaseRunning, now.Add(-time.Hour), "1.5", 100),
		run("b", v1alpha1.PhaseAwaitingApproval, now.Add(-time.Minute), "0.25", 10),
		run("c", v1alpha1.PhaseAwaitingInput, yesterday, "9", 900),
		run("d", v1alpha1.PhaseSucceeded, now.Add(-2*time.Hour), "2", 200),
		run("e", v1alpha1.PhaseQueued, time.Time{}, "", 0),
		run("f", v1alpha1.PhasePending, time.Time{}, "", 0),
		held,
	}
	u := Count(runs, func(name string) bool { return name == "f" })
	if u.Running != 5 || u.Queued != 1 || u.Held != 1 {
		t.Errorf("running %d queued %d held %d; want 5 (four at work, one admitted), 1 and 1", u.Running, u.Queued, u.Held)
	}
	if !u.Spent.DayCost.IsZero() || u.Spent.DayTokens != 0 {
		t.Errorf("spent %+v: what runs spent is the ledger's, not counted from the runs that still exist", u.Spent)
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

func TestACostOrTokenCapReachedHoldsEveryRunUntilItsPeriodResets(t *testing.T) {
	q := []v1alpha1.AgentQuota{
		quotaOf("runs", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](100)}),
		quotaOf("money", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("12.00"), MaxTokensPerDay: ptr.To[int64](1000),
			MaxCostPerMonth: ptr.To("100"), MaxTokensPerMonth: ptr.To[int64](5000), MaxTranscriptBytes: ptr.To[int64](1 << 20)}),
	}
	me := Waiting{Name: "r", Created: now}
	under := Use{Spent: Spent{DayCost: decimal.RequireFromString("11.99"), DayTokens: 999, MonthCost: decimal.RequireFromString("99"), MonthTokens: 4999}}
	if v := Decide(q, under, nil, me, now); !v.Admit {
		t.Fatalf("under every cap: %+v", v)
	}
	for _, c := range []struct {
		name string
		use  Use
		want string
	}{
		{"the day's cost", Use{Spent: Spent{DayCost: decimal.RequireFromString("12")}},
			`quota "money": 12 of 12 spent today (UTC); the day resets at 2026-11-26T00:00:00Z`},
		{"the day's tokens", Use{Spent: Spent{DayTokens: 1000}}, "1000 of 1000 tokens used today (UTC)"},
		{"the month's cost", Use{Spent: Spent{MonthCost: decimal.RequireFromString("100.5")}},
			"100.5 of 100 spent this month (UTC); the month resets at 2026-12-01T00:00:00Z"},
		{"the month's tokens", Use{Spent: Spent{MonthTokens: 5000}}, "5000 of 5000 tokens used this month (UTC)"},
		{"the namespace's transcripts", Use{TranscriptBytes: 1 << 20}, "transcripts take 1048576 of 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Decide(q, c.use, nil, me, now)
			if v.Admit || v.Reason != v1alpha1.ReasonQuotaExceeded || !strings.Contains(v.Message, c.want) {
				t.Fatalf("verdict %+v; want held saying %q", v, c.want)
			}
		})
	}
}

func TestQuotasThatDisagreeHoldEveryRunAndSaySo(t *testing.T) {
	q := []v1alpha1.AgentQuota{
		quotaOf("a", v1alpha1.AgentQuotaSpec{DefaultQueue: ptr.To("team-a")}),
		quotaOf("b", v1alpha1.AgentQuotaSpec{DefaultQueue: ptr.To("team-b")}),
	}
	v := Decide(q, Use{}, nil, Waiting{Name: "r", Created: now}, now)
	if v.Admit || !strings.Contains(v.Message, "defaultQueue: a says team-a, b says team-b") {
		t.Fatalf("verdict %+v; want held, naming the conflict", v)
	}
	caps := CapsOf(q)
	st := Status(&q[0], &caps, Use{}, now)
	if c := st.Conditions[0]; c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonQuotaConflict {
		t.Errorf("condition %+v; want Ready False QuotaConflict", c)
	}
}

func TestStatusShowsUseTheResetAndWhetherThereIsRoom(t *testing.T) {
	q := quotaOf("team-a", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](2)})
	q.Generation = 3
	caps := CapsOf([]v1alpha1.AgentQuota{q})
	use := Use{Running: 2, Queued: 5, Held: 1, TranscriptBytes: 77,
		Spent: Spent{DayCost: decimal.RequireFromString("1.5"), MonthCost: decimal.RequireFromString("20"), DayTokens: 42, MonthTokens: 420}}
	st := Status(&q, &caps, use, now)
	if st.Running != 2 || st.Queued != 5 || st.HeldRuns != 1 || st.CostToday != "1.5" || st.CostThisMonth != "20" || st.TokensToday != 42 ||
		st.TokensThisMonth != 420 || st.TranscriptBytes != 77 || st.Currency != "USD" || st.ObservedGeneration != 3 {
		t.Errorf("status %+v", st)
	}
	if !st.ResetTime.Time.Equal(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("reset %s, want the next UTC midnight", st.ResetTime)
	}
	if c := st.Conditions[0]; c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonQuotaExceeded || c.Message != "2 of 2 runs running" {
		t.Errorf("condition %+v; want Ready False QuotaExceeded", c)
	}
	q.Status = st
	st = Status(&q, &caps, Use{Running: 1}, now.Add(time.Minute))
	if c := st.Conditions[0]; c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now.Add(time.Minute)) {
		t.Errorf("condition %+v; want Ready True since the change", c)
	}
	st = Status(&q, &caps, Use{Running: 1, Held: 3}, now)
	if c := st.Conditions[0]; c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "3 runs wait at a cost or token cap") {
		t.Errorf("condition %+v; want Ready False while runs are held", c)
	}
}
