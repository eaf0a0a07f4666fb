package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/quota"
)

// A run's Kueue priority is its namespace's to give, not its author's: spec.priorityClassName
// must name one of the WorkloadPriorityClasses its namespace's AgentQuotas list, and a run that
// names another is refused when it is created (its spec.priority is clamped to their values
// when Kueue admits it).

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentquotas,verbs=get;list

// priorityClass says why the run may not be created with its spec.priorityClassName, if it may
// not: the namespace's quotas do not list it.
func (w *Decisions) priorityClass(ctx context.Context, run *v1alpha1.AgentRun) (string, error) {
	name := run.Spec.PriorityClassName
	if name == "" {
		return "", nil
	}
	quotas := &v1alpha1.AgentQuotaList{}
	if err := w.Client.List(ctx, quotas, client.InNamespace(run.Namespace)); err != nil {
		return "", fmt.Errorf("reading the namespace's AgentQuotas: %w", err)
	}
	caps := quota.CapsOf(quotas.Items)
	switch {
	case slices.Contains(caps.PriorityClasses, name):
		return "", nil
	case len(caps.PriorityClasses) == 0:
		return fmt.Sprintf("spec.priorityClassName %q: no AgentQuota of namespace %s lists priorityClasses, so its runs may name none", name, run.Namespace), nil
	}
	return fmt.Sprintf("spec.priorityClassName %q is not one of the priority classes the AgentQuotas of namespace %s allow: %s",
		name, run.Namespace, strings.Join(caps.PriorityClasses, ", ")), nil
}
