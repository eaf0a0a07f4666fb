package agentrun

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// relay is a team of five Scripted agents that hand the work down the line, the last ending the
// run at step 5; each step reports 100 tokens.
func relay() *v1alpha1.AgentConfig {
	return MakeConfig("relay", ns).Agents(
		MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b").Tokens(100)),
		MakeAgent("b").HandsOffTo("c").Script(Says("to c").HandOff("c").Tokens(100)),
		MakeAgent("c").HandsOffTo("d").Script(Says("to d").HandOff("d").Tokens(100)),
		MakeAgent("d").HandsOffTo("e").Script(Says("to e").HandOff("e").Tokens(100)),
		MakeAgent("e").Terminator().Script(Says("done").Tokens(100)),
	).Obj()
}

func quotaOf(name string, spec v1alpha1.AgentQuotaSpec) *v1alpha1.AgentQuota {
	q := &v1alpha1.AgentQuota{Spec: spec}
	q.Name, q.Namespace = name, ns
	return q
}

func TestARunGetsNoMoreThanItsNamespacesRunLimitsWhateverItAsks(t *testing.T) {
	for _, c := range []struct {
		name   string
		limits *v1alpha1.LimitOverrides
		quotas []*v1alpha1.AgentQuota
		reason v1alpha1.TerminationReason
		status v1alpha1.EffectiveLimits
		setBy  map[string]string
	}{
		{
			name:   "a run that asks for ten thousand steps gets the quota's three, and the quota's maxCost",
			limits: &v1alpha1.LimitOverrides{MaxSteps: ptr.To[int32](10000), Timeout: ptr.To(v1alpha1.Duration("8760h"))},
			quotas: []*v1alpha1.AgentQuota{quotaOf("tenants", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{
				MaxSteps: ptr.To[int32](3), MaxCost: ptr.To("5.00"), Timeout: ptr.To(v1alpha1.Duration("2h"))}})},
			reason: v1alpha1.ReasonMaxStepsExceeded,
			status: v1alpha1.EffectiveLimits{MaxSteps: 3, MaxCost: "5", Timeout: v1alpha1.NewDuration(2 * time.Hour)},
			setBy:  map[string]string{"maxSteps": "tenants", "maxCost": "tenants", "timeout": "tenants"},
		},
		{
			name:   "of two quotas the lower bound wins, and names its quota",
			limits: &v1alpha1.LimitOverrides{MaxTokens: ptr.To[int64](1_000_000)},
			quotas: []*v1alpha1.AgentQuota{
				quotaOf("platform", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{MaxTokens: ptr.To[int64](10000)}}),
				quotaOf("team", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{MaxTokens: ptr.To[int64](250)}}),
			},
			reason: v1alpha1.ReasonTokenBudgetExceeded,
			status: v1alpha1.EffectiveLimits{MaxTokens: 250},
			setBy:  map[string]string{"maxTokens": "team"},
		},
		{
			name:   "a run that asks for less than the bound keeps its own limit",
			limits: &v1alpha1.LimitOverrides{MaxSteps: ptr.To[int32](2)},
			quotas: []*v1alpha1.AgentQuota{quotaOf("tenants", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{MaxSteps: ptr.To[int32](3)}})},
			reason: v1alpha1.ReasonMaxStepsExceeded,
			status: v1alpha1.EffectiveLimits{MaxSteps: 2},
		},
		{
			name:   "without a quota the run is as its author asked, and its status says nothing of limits",
			limits: &v1alpha1.LimitOverrides{MaxSteps: ptr.To[int32](10)},
			reason: v1alpha1.ReasonCompleted,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := MakeRun("r", ns).Config("relay").Obj()
			run.UID, run.Spec.Limits = types.UID("uid-r"), c.limits
			objs := []client.Object{relay(), run}
			for _, q := range c.quotas {
				objs = append(objs, q)
			}
			o := newOperator(t, objs...)
			got := o.drive(t, "r", ended)
			if got.Status.TerminationReason != c.reason {
				t.Fatalf("ended %s (%s), want %s", got.Status.TerminationReason, got.Status.TerminationMessage, c.reason)
			}
			if len(c.quotas) == 0 {
				if got.Status.Limits != nil {
					t.Fatalf("status.limits %+v without a quota", got.Status.Limits)
				}
				return
			}
			l := got.Status.Limits
			if l == nil {
				t.Fatal("no status.limits under a quota")
			}
			if c.status.MaxSteps != 0 && l.MaxSteps != c.status.MaxSteps || c.status.MaxTokens != 0 && l.MaxTokens != c.status.MaxTokens ||
				l.MaxCost != c.status.MaxCost || c.status.Timeout != nil && *l.Timeout != *c.status.Timeout {
				t.Fatalf("status.limits %+v, want %+v", l, c.status)
			}
			setBy := map[string]string{}
			for _, s := range l.SetBy {
				setBy[s.Limit] = s.Quota
			}
			if len(setBy) != len(c.setBy) {
				t.Fatalf("setBy %v, want %v", setBy, c.setBy)
			}
			for k, v := range c.setBy {
				if setBy[k] != v {
					t.Fatalf("setBy %v, want %v", setBy, c.setBy)
				}
			}
		})
	}
}

func TestARunKeepsTheLimitsItStartedWithWhenItsQuotaChanges(t *testing.T) {
	run := MakeRun("r", ns).Config("relay").Obj()
	run.UID = "uid-r"
	q := quotaOf("tenants", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{MaxSteps: ptr.To[int32](4)}})
	o := newOperator(t, relay(), run, q)
	started := o.drive(t, "r", func(r *v1alpha1.AgentRun) bool { return r.Status.StepCount >= 1 })
	if started.Status.Limits == nil || started.Status.Limits.MaxSteps != 4 {
		t.Fatalf("status.limits %+v, want maxSteps 4", started.Status.Limits)
	}
	// The quota is deleted, and the operator restarts: the run still ends at the 4 it started with.
	if err := o.Delete(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	o.r = New(o.r.Config)
	startWriter(t, o.r)
	got := o.drive(t, "r", ended)
	if got.Status.TerminationReason != v1alpha1.ReasonMaxStepsExceeded || got.Status.StepCount != 4 {
		t.Fatalf("ended %s at step %d, want MaxStepsExceeded at 4", got.Status.TerminationReason, got.Status.StepCount)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != string(v1alpha1.ReasonMaxStepsExceeded) {
		t.Fatalf("Progressing %+v", c)
	}
}
