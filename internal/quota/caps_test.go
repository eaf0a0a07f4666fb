package quota

import (
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

func TestTheLowestCapOfTheNamespacesQuotasWinsAndNamesItsQuota(t *testing.T) {
	c := CapsOf([]v1alpha1.AgentQuota{
		quotaOf("b-team", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("5"), MaxTokensPerMonth: ptr.To[int64](900),
			RunLimits: &v1alpha1.QuotaRunLimits{MaxSteps: ptr.To[int32](50), Timeout: ptr.To(v1alpha1.Duration("1h"))}}),
		quotaOf("a-platform", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("50"), MaxTokensPerMonth: ptr.To[int64](100),
			Admission: v1alpha1.AdmissionKueue, RunLimits: &v1alpha1.QuotaRunLimits{MaxSteps: ptr.To[int32](200), Timeout: ptr.To(v1alpha1.Duration("30m"))}}),
	})
	if !c.CostPerDay.Limit.Equal(decimal.NewFromInt(5)) || c.CostPerDay.Quota != "b-team" {
		t.Errorf("cost per day %+v; want b-team's 5", c.CostPerDay)
	}
	if c.TokensPerMonth.Limit != 100 || c.TokensPerMonth.Quota != "a-platform" {
		t.Errorf("tokens per month %+v; want a-platform's 100", c.TokensPerMonth)
	}
	if c.Runs.MaxSteps.Limit != 50 || c.Runs.MaxSteps.Quota != "b-team" || c.Runs.Timeout != 30*time.Minute || c.Runs.TimeoutBy != "a-platform" {
		t.Errorf("run bounds %+v", c.Runs)
	}
	if !c.Kueue || c.KueueBy != "a-platform" || c.Currency != "USD" || c.Conflict != "" {
		t.Errorf("caps %+v; want Kueue by a-platform, USD, no conflict", c)
	}
}

func TestQuotasThatNameDifferentQueuesClassesOrCurrenciesConflict(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b v1alpha1.AgentQuotaSpec
		want string
	}{
		{"queues", v1alpha1.AgentQuotaSpec{DefaultQueue: ptr.To("q1")}, v1alpha1.AgentQuotaSpec{DefaultQueue: ptr.To("q2")}, "defaultQueue: a says q1, b says q2"},
		{"classes", v1alpha1.AgentQuotaSpec{PriorityClasses: []string{"low", "high"}}, v1alpha1.AgentQuotaSpec{PriorityClasses: []string{"low"}},
			"priorityClasses: a says [low, high], b says [low]"},
		{"currencies", v1alpha1.AgentQuotaSpec{Currency: ptr.To("EUR")}, v1alpha1.AgentQuotaSpec{Currency: ptr.To("USD")}, "currency: a says EUR, b says USD"},
		{"one sets, the other is silent", v1alpha1.AgentQuotaSpec{DefaultQueue: ptr.To("q1")}, v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](1)}, ""},
		{"both say the same", v1alpha1.AgentQuotaSpec{PriorityClasses: []string{"low"}}, v1alpha1.AgentQuotaSpec{PriorityClasses: []string{"low"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CapsOf([]v1alpha1.AgentQuota{quotaOf("b", c.b), quotaOf("a", c.a)}).Conflict
			if got != c.want {
				t.Fatalf("conflict %q, want %q", got, c.want)
			}
		})
	}
}

func TestACallIsMadeHeldEndedOrRefusedByItsWorstCase(t *testing.T) {
	caps := CapsOf([]v1alpha1.AgentQuota{quotaOf("money", v1alpha1.AgentQuotaSpec{
		MaxCostPerDay: ptr.To("10"), MaxCostPerMonth: ptr.To("100"), MaxTokensPerDay: ptr.To[int64](10000)})})
	usd := func(worst string, tokens int64) Call {
		return Call{Tokens: tokens, Cost: decimal.RequireFromString(worst), Currency: "USD", Priced: true}
	}
	spent := Spent{DayCost: decimal.RequireFromString("9"), DayTokens: 5000, MonthCost: decimal.RequireFromString("50")}
	for _, c := range []struct {
		name    string
		spent   Spent
		call    Call
		outcome CallOutcome
		reason  v1alpha1.TerminationReason
		says    string
		until   time.Time
	}{
		{"a call that fits every cap is made", spent, usd("1", 100), Allowed, "", "", time.Time{}},
		{"a call that would pass the day's cost waits for the next day", spent, usd("1.01", 100), Held, "",
			`quota "money": 9 of 10 USD spent today (UTC), and the next model call could cost up to 1.01`, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
		{"a call that would pass the day's tokens waits", spent, usd("0.1", 5001), Held, "", "5000 of 10000 tokens used today (UTC)", time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
		{"a call that would pass the month's cost waits for the next month", Spent{MonthCost: decimal.RequireFromString("99.5")}, usd("1", 1), Held, "",
			"99.5 of 100 USD spent this month (UTC)", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"a call whose worst case alone is more than the day's cost ends the run", Spent{}, usd("10.5", 1), Exceeded, v1alpha1.ReasonCostBudgetExceeded,
			"could cost up to 10.5 USD, more than the 10 USD the namespace may spend today", time.Time{}},
		{"a call whose tokens alone are more than the day's ends the run", Spent{}, usd("0", 10001), Exceeded, v1alpha1.ReasonTokenBudgetExceeded,
			"could use up to 10001 tokens, more than the 10000", time.Time{}},
		{"a model without a price is refused under a cost cap", Spent{}, Call{Tokens: 1}, Refused, "", "the model has no price", time.Time{}},
		{"a model priced in another currency is refused", Spent{}, Call{Tokens: 1, Priced: true, Currency: "EUR"}, Refused, "", "in USD, and the model is priced in EUR", time.Time{}},
		{"a Scripted turn costs nothing and counts its tokens", spent, Call{Tokens: 5000, Free: true}, Allowed, "", "", time.Time{}},
		{"a Scripted turn still waits at the token cap", spent, Call{Tokens: 5001, Free: true}, Held, "", "tokens used today", time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := CheckCall(&caps, c.spent, c.call, now)
			if v.Outcome != c.outcome || v.Reason != c.reason || !strings.Contains(v.Message, c.says) || !v.Until.Equal(c.until) {
				t.Fatalf("verdict %+v; want outcome %d, reason %q, saying %q, until %v", v, c.outcome, c.reason, c.says, c.until)
			}
			if c.outcome != Allowed && v.Quota != "money" {
				t.Fatalf("verdict names quota %q, want money", v.Quota)
			}
		})
	}
	if v := CheckCall(&Caps{Currency: "USD"}, Spent{}, Call{Tokens: 1 << 40}, now); v.Outcome != Allowed {
		t.Fatalf("with no cap a call was %+v", v)
	}
}

// TestACallIsMadeOnlyWithinEveryCap checks, for any caps, spend and call, that a call made
// leaves every cap unpassed, that a held call could be made within its caps once its period
// resets, and that a call is ended only when no period could ever hold it.
func TestACallIsMadeOnlyWithinEveryCap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		amount := func(label string) *string {
			if !rapid.Bool().Draw(t, label+"?") {
				return nil
			}
			return ptr.To(cost.Format(decimal.New(rapid.Int64Range(0, 5000).Draw(t, label), -2)))
		}
		count := func(label string) *int64 {
			if !rapid.Bool().Draw(t, label+"?") {
				return nil
			}
			return ptr.To(rapid.Int64Range(0, 5000).Draw(t, label))
		}
		caps := CapsOf([]v1alpha1.AgentQuota{quotaOf("q", v1alpha1.AgentQuotaSpec{MaxCostPerDay: amount("costDay"), MaxCostPerMonth: amount("costMonth"),
			MaxTokensPerDay: count("tokensDay"), MaxTokensPerMonth: count("tokensMonth")})})
		spent := Spent{DayCost: decimal.New(rapid.Int64Range(0, 5000).Draw(t, "spentDay"), -2), DayTokens: rapid.Int64Range(0, 5000).Draw(t, "usedDay")}
		spent.MonthCost = spent.DayCost.Add(decimal.New(rapid.Int64Range(0, 5000).Draw(t, "spentMonth"), -2))
		spent.MonthTokens = spent.DayTokens + rapid.Int64Range(0, 5000).Draw(t, "usedMonth")
		call := Call{Tokens: rapid.Int64Range(0, 3000).Draw(t, "tokens"), Cost: decimal.New(rapid.Int64Range(0, 3000).Draw(t, "cost"), -2),
			Currency: "USD", Priced: true}
		v := CheckCall(&caps, spent, call, now)
		within := func(s Spent) bool {
			return (!caps.CostPerDay.Set || s.DayCost.Add(call.Cost).LessThanOrEqual(caps.CostPerDay.Limit)) &&
				(!caps.CostPerMonth.Set || s.MonthCost.Add(call.Cost).LessThanOrEqual(caps.CostPerMonth.Limit)) &&
				(!caps.TokensPerDay.Set || s.DayTokens+call.Tokens <= caps.TokensPerDay.Limit) &&
				(!caps.TokensPerMonth.Set || s.MonthTokens+call.Tokens <= caps.TokensPerMonth.Limit)
		}
		switch v.Outcome {
		case Allowed:
			if !within(spent) {
				t.Fatalf("a call that passes a cap was allowed: %+v", v)
			}
		case Held:
			if within(spent) || !within(Spent{}) || v.Until.IsZero() {
				t.Fatalf("held a call %+v that fits, or that no period could ever hold", v)
			}
		case Exceeded:
			if within(Spent{}) {
				t.Fatalf("ended a run for a call that fits an empty period: %+v", v)
			}
		case Refused:
			t.Fatalf("a priced call in the caps' currency was refused: %+v", v)
		}
	})
}

func TestARunsLimitsAreBoundedByItsNamespacesRunLimits(t *testing.T) {
	caps := CapsOf([]v1alpha1.AgentQuota{quotaOf("tenants", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{
		MaxCost: ptr.To("5.00"), MaxSteps: ptr.To[int32](200), MaxTokens: ptr.To[int64](2000000), Timeout: ptr.To(v1alpha1.Duration("2h")),
		MaxTranscriptBytes: ptr.To[int64](256 << 20), MaxBranches: ptr.To[int32](8), MaxDepth: ptr.To[int32](1)}})})
	asked := &v1alpha1.LimitOverrides{MaxSteps: ptr.To[int32](10000), MaxTokens: ptr.To[int64](1000), Timeout: ptr.To(v1alpha1.Duration("24h")),
		MaxTranscriptBytes: ptr.To[int64](16 << 30), MaxToolCalls: ptr.To[int32](7)}
	eff := workflow.EffectiveLimits{MaxSteps: 10000, MaxTokens: 1000, Timeout: 24 * time.Hour, MaxTranscriptBytes: 16 << 30, MaxBranches: 16, MaxDepth: 2, MaxToolCalls: 7}
	got, st := Bound(eff, asked, caps.Runs)
	if *got.MaxSteps != 200 || *got.MaxTokens != 1000 || *got.Timeout != "2h0m0s" || *got.MaxTranscriptBytes != 256<<20 ||
		*got.MaxCost != "5" || *got.MaxBranches != 8 || *got.MaxDepth != 1 || *got.MaxToolCalls != 7 {
		t.Fatalf("bounded overrides %+v", got)
	}
	if *asked.MaxSteps != 10000 {
		t.Fatal("the run's own overrides were changed")
	}
	if st.MaxSteps != 200 || st.MaxTokens != 1000 || st.MaxCost != "5" || *st.Timeout != "2h0m0s" || len(st.SetBy) != 6 {
		t.Fatalf("status %+v; want the effective limits, six of them set by the quota (maxTokens was lower already)", st)
	}
	if again := Overrides(asked, st); *again.MaxSteps != 200 || *again.MaxCost != "5" || *again.MaxTokens != 1000 || *again.Timeout != "2h0m0s" {
		t.Fatalf("the overrides rebuilt from status %+v differ from those the run started with", again)
	}
	if o, st := Bound(eff, asked, RunBounds{}); o != asked || st != nil {
		t.Fatalf("without bounds: %+v %+v; want the run's own overrides and no status", o, st)
	}
}
