// Package modelendpoint is the controller of ModelEndpoints and ClusterModelEndpoints: it hands
// each endpoint's configured limits to the pacer, and writes what the pacer saw of its use into
// the endpoint's status (calls and tokens over the last minute, calls in flight, steps waiting,
// 429s), every few seconds at most and only when it changed.
package modelendpoint

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/pacing"
)

// How often an endpoint's use is looked at, and written if it changed: while steps use it,
// and while it is idle (a step may start on it any time).
const (
	busyEvery = 5 * time.Second
	idleEvery = 10 * time.Second
)

// Reconciler keeps the pacer's limits and the endpoints' status up to date.
type Reconciler struct {
	client.Client
	Pacer     *pacing.Pacer
	Endpoints *endpoints.Resolver
}

// +kubebuilder:rbac:groups=agents.baton.dev,resources=modelendpoints/status;clustermodelendpoints/status,verbs=get;update;patch

// endpoint is what both kinds have in common: the object, its spec and its status.
type endpoint struct {
	obj    client.Object
	spec   *v1alpha1.ModelEndpointSpec
	status *v1alpha1.ModelEndpointStatus
}

func namespaced() endpoint {
	o := &v1alpha1.ModelEndpoint{}
	return endpoint{obj: o, spec: &o.Spec, status: &o.Status}
}

func clustered() endpoint {
	o := &v1alpha1.ClusterModelEndpoint{}
	return endpoint{obj: o, spec: &o.Spec, status: &o.Status}
}

// Reconcile writes one endpoint's status; the request's namespace is empty for a
// ClusterModelEndpoint.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := pacing.Key{Kind: string(v1alpha1.KindModelEndpoint), Namespace: req.Namespace, Name: req.Name}
	e := namespaced()
	if req.Namespace == "" {
		key.Kind = string(v1alpha1.KindClusterModelEndpoint)
		e = clustered()
	}
	obj := e.obj
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pacer.Forget(key)
			r.Endpoints.Forget(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	spec := e.spec
	use := r.Pacer.Endpoint(key, endpoints.Limits(spec.Limits)).Use()
	status := *e.status.DeepCopy()
	status.ObservedGeneration = obj.GetGeneration()
	status.RequestsLastMinute, status.TokensLastMinute = use.RequestsLastMinute, use.TokensLastMinute
	status.InFlight, status.Waiting, status.RateLimited = use.InFlight, use.Waiting, use.RateLimited
	status.EffectiveLimits = limitsOf(use.Limits)
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "agents may use this endpoint", ObservedGeneration: obj.GetGeneration()}
	if err := endpoints.Check(key, spec); err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "Invalid", fmt.Sprintf("steps on this endpoint fail: %v", err)
	}
	meta.SetStatusCondition(&status.Conditions, ready)
	every := idleEvery
	if use.InFlight > 0 || use.Waiting > 0 || use.RequestsLastMinute > 0 {
		every = busyEvery
	}
	if equality.Semantic.DeepEqual(status, *e.status) {
		return ctrl.Result{RequeueAfter: every}, nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	*e.status = status
	if err := r.Status().Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	metrics.APIWrites.WithLabelValues("endpoint-status").Inc()
	return ctrl.Result{RequeueAfter: every}, nil
}

// limitsOf is the pacer's limits as the status shows them; nil when none is known.
func limitsOf(l pacing.Limits) *v1alpha1.EndpointLimits {
	if l == (pacing.Limits{}) {
		return nil
	}
	out := &v1alpha1.EndpointLimits{}
	if l.RequestsPerMinute > 0 {
		out.RequestsPerMinute = &l.RequestsPerMinute
	}
	if l.TokensPerMinute > 0 {
		out.TokensPerMinute = &l.TokensPerMinute
	}
	if l.MaxConcurrent > 0 {
		c := int32(min(l.MaxConcurrent, 1<<30))
		out.MaxConcurrent = &c
	}
	return out
}

// SetupWithManager watches both kinds; a status write of its own does not wake it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("modelendpoint").
		For(&v1alpha1.ModelEndpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("clustermodelendpoint").
		For(&v1alpha1.ClusterModelEndpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
