package quota

import (
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

// Bound applies a namespace's runLimits to a run: given the run's effective limits (its
// config's, its own overrides and the defaults) and its overrides, it returns the overrides the
// run runs under, each limit lowered to its bound, and what the run's status says of them. A
// run without a maxCost gets the bound's. Without any bound, the overrides are the run's own
// and the status says nothing.
func Bound(eff workflow.EffectiveLimits, overrides *v1alpha1.LimitOverrides, b RunBounds) (*v1alpha1.LimitOverrides, *v1alpha1.EffectiveLimits) {
	if b == (RunBounds{}) {
		return overrides, nil
	}
	out := &v1alpha1.LimitOverrides{}
	if overrides != nil {
		out = overrides.DeepCopy()
	}
	st := &v1alpha1.EffectiveLimits{}
	set := func(limit, quota string) {
		st.SetBy = append(st.SetBy, v1alpha1.LimitSource{Limit: limit, Quota: quota})
	}
	if m := b.MaxCost; m.Set && (!eff.CostLimited || eff.CostLimit.GreaterThan(m.Limit)) {
		eff.CostLimit, eff.CostLimited = m.Limit, true
		out.MaxCost = ptr.To(cost.Format(m.Limit))
		set("maxCost", m.Quota)
	}
	if lowered(&eff.MaxSteps, b.MaxSteps) {
		out.MaxSteps = ptr.To(eff.MaxSteps)
		set("maxSteps", b.MaxSteps.Quota)
	}
	if lowered(&eff.MaxTokens, b.MaxTokens) {
		out.MaxTokens = ptr.To(eff.MaxTokens)
		set("maxTokens", b.MaxTokens.Quota)
	}
	if b.TimeoutBy != "" && eff.Timeout > b.Timeout {
		eff.Timeout = b.Timeout
		out.Timeout = v1alpha1.NewDuration(b.Timeout)
		set("timeout", b.TimeoutBy)
	}
	if lowered(&eff.MaxTranscriptBytes, b.MaxTranscriptBytes) {
		out.MaxTranscriptBytes = ptr.To(eff.MaxTranscriptBytes)
		set("maxTranscriptBytes", b.MaxTranscriptBytes.Quota)
	}
	if lowered(&eff.MaxBranches, b.MaxBranches) {
		out.MaxBranches = ptr.To(eff.MaxBranches)
		set("maxBranches", b.MaxBranches.Quota)
	}
	if lowered(&eff.MaxDepth, b.MaxDepth) {
		out.MaxDepth = ptr.To(eff.MaxDepth)
		set("maxDepth", b.MaxDepth.Quota)
	}
	st.MaxSteps, st.MaxTokens, st.MaxTranscriptBytes = eff.MaxSteps, eff.MaxTokens, eff.MaxTranscriptBytes
	st.MaxBranches, st.MaxDepth, st.Timeout = eff.MaxBranches, eff.MaxDepth, v1alpha1.NewDuration(eff.Timeout)
	if eff.CostLimited {
		st.MaxCost = cost.Format(eff.CostLimit)
	}
	if len(st.SetBy) == 0 {
		return overrides, st
	}
	return out, st
}

// lowered lowers v to bound t, if t is set and v is above it, and says whether it did.
func lowered[T int32 | int64](v *T, t Tokens) bool {
	if !t.Set || int64(*v) <= t.Limit {
		return false
	}
	*v = T(t.Limit)
	return true
}

// Overrides are the overrides a started run runs under: its own, with the limits its status
// says a quota set when it started. A restart gives the run the same limits, whatever the
// quotas say now.
func Overrides(overrides *v1alpha1.LimitOverrides, st *v1alpha1.EffectiveLimits) *v1alpha1.LimitOverrides {
	if st == nil || len(st.SetBy) == 0 {
		return overrides
	}
	out := &v1alpha1.LimitOverrides{}
	if overrides != nil {
		out = overrides.DeepCopy()
	}
	for _, s := range st.SetBy {
		switch s.Limit {
		case "maxCost":
			out.MaxCost = ptr.To(st.MaxCost)
		case "maxSteps":
			out.MaxSteps = ptr.To(st.MaxSteps)
		case "maxTokens":
			out.MaxTokens = ptr.To(st.MaxTokens)
		case "timeout":
			if st.Timeout != nil {
				out.Timeout = ptr.To(*st.Timeout)
			}
		case "maxTranscriptBytes":
			out.MaxTranscriptBytes = ptr.To(st.MaxTranscriptBytes)
		case "maxBranches":
			out.MaxBranches = ptr.To(st.MaxBranches)
		case "maxDepth":
			out.MaxDepth = ptr.To(st.MaxDepth)
		}
	}
	return out
}
