// Package agentquota is the controller of AgentQuotas: it writes what the quota's namespace uses
// (runs at work, in line and held at a cap, the UTC day's and month's cost and tokens from the
// ledger, what its transcripts take, the next reset) into the quota's status, and whether the
// namespace's quotas agree, every few seconds at most and only when it changed. It also owns the cache indexes
// through which the AgentRun reconciler and it read that use.
package agentquota

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/quota"
)

// every is how often a quota's use is looked at, and written if it changed.
const every = 5 * time.Second

// Reconciler keeps AgentQuotas' status up to date.
type Reconciler struct {
	client.Client
	Clock clock.Clock
	// Usage reads what the namespace uses: runs, spend, transcript bytes.
	Usage *Usage
}

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentquotas/status,verbs=get;update;patch

// Reconcile writes one quota's status, and looks again soon, or at the day's reset if sooner.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	q := &v1alpha1.AgentQuota{}
	if err := r.Get(ctx, req.NamespacedName, q); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	quotas := &v1alpha1.AgentQuotaList{}
	if err := r.List(ctx, quotas, client.InNamespace(q.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	use, _, _, err := r.Usage.Of(ctx, q.Namespace, quotas.Items, func(string) bool { return false }, true, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	caps := quota.CapsOf(quotas.Items)
	status := quota.Status(q, &caps, use, now)
	next := min(every, quota.DayStart(now).Add(24*time.Hour).Sub(now)+time.Second)
	if equality.Semantic.DeepEqual(status, q.Status) {
		return ctrl.Result{RequeueAfter: next}, nil
	}
	patch := client.MergeFrom(q.DeepCopy())
	q.Status = status
	return ctrl.Result{RequeueAfter: next}, r.Status().Patch(ctx, q, patch)
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentQuota{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
