// Package agentquota is the controller of AgentQuotas: it writes what the quota's namespace uses
// (runs at work and in line, the UTC day's cost and tokens, the next reset) into the quota's
// status, every few seconds at most and only when it changed. It also owns the cache indexes
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
	runs, _, err := Counted(ctx, r.Client, q.Namespace, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := quota.Status(q, quota.Measure(runs, func(string) bool { return false }, now), now)
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
