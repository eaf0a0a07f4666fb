package agentrun

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentconfig"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/sessions"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run's limits are its config's, its own overrides, and at most its namespace's AgentQuotas'
// runLimits (quota.Bound): a run that asks for more, or leaves maxCost unset, gets the quota's.
// A turn of a session gets at most what is left of its session's limits (sessions.TurnBounds).
// The limits a quota set are written in the run's status when it starts (status.limits), and a
// started run's plan is built from them, so the run keeps the limits it started with after a
// restart, whatever the quotas say then.

// boundPlan is the config's plan for a run of the namespace with these overrides, under the
// namespace's runLimits; the overrides the plan was built with, and what the run's status says
// of its limits (nil when no quota bounds them).
func (r *Reconciler) boundPlan(ctx context.Context, namespace string, spec v1alpha1.AgentConfigSpec, overrides *v1alpha1.LimitOverrides, t *turn) (*workflow.Plan, *v1alpha1.LimitOverrides, *v1alpha1.EffectiveLimits, field.ErrorList, error) {
	plan, errs := agentconfig.Check(spec, overrides, r.Providers)
	if len(errs) > 0 {
		return plan, overrides, nil, errs, nil
	}
	caps, err := r.caps.Caps(ctx, r.Client, namespace)
	if err != nil {
		return plan, overrides, nil, nil, err
	}
	var b quota.RunBounds
	if caps != nil {
		b = caps.Runs
	}
	if t != nil {
		b = sessions.TurnBounds(b, t.session, t.limits, t.tokens, t.spent)
	}
	if b == (quota.RunBounds{}) {
		return plan, overrides, nil, nil, nil
	}
	bounded, st := quota.Bound(plan.Limits, overrides, b)
	if st == nil || len(st.SetBy) == 0 {
		return plan, overrides, st, nil, nil
	}
	plan, errs = agentconfig.Check(spec, bounded, r.Providers)
	return plan, bounded, st, errs, nil
}

// startedLimits are the overrides a started run runs under: its own, with those a quota set
// when it started.
func startedLimits(run *v1alpha1.AgentRun) *v1alpha1.LimitOverrides {
	return quota.Overrides(run.Spec.Limits, run.Status.Limits)
}
