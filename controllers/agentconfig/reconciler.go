// Package agentconfig is the AgentConfig controller, and the check of a config that it and the
// AgentRun controller share: whether runs can start with it in this operator build.
package agentconfig

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/workflow"
)

// Reconciler reports in each AgentConfig's status whether runs can start with it:
// the checks the API server cannot make (such as a provider this build lacks) show up here
// before a run ends ConfigInvalid on them.
type Reconciler struct {
	client.Client
	Providers *agents.Providers
}

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentconfigs/status,verbs=get;update;patch

// Reconcile writes the config's Ready condition (and Stalled when runs cannot start with it),
// once per spec generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg := &v1alpha1.AgentConfig{}
	if err := r.Get(ctx, req.NamespacedName, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status := *cfg.Status.DeepCopy()
	status.Agents = int32(len(cfg.Spec.Agents))
	status.ObservedGeneration = cfg.Generation
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "runs can start with this config"}
	if _, errs := Check(cfg.Spec, nil, r.Providers); len(errs) > 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, string(v1alpha1.ReasonConfigInvalid)
		ready.Message = fmt.Sprintf("runs of this config end ConfigInvalid: %v", errs.ToAggregate())
	}
	ready.ObservedGeneration = cfg.Generation
	meta.SetStatusCondition(&status.Conditions, ready)
	// kstatus (Flux, Argo CD) reads a config runs cannot start with as Failed.
	if ready.Status == metav1.ConditionFalse {
		stalled := ready
		stalled.Type, stalled.Status = v1alpha1.ConditionStalled, metav1.ConditionTrue
		meta.SetStatusCondition(&status.Conditions, stalled)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionStalled)
	}
	if equality.Semantic.DeepEqual(status, cfg.Status) {
		return ctrl.Result{}, nil
	}
	orig := cfg.DeepCopy()
	cfg.Status = status
	if err := r.Status().Patch(ctx, cfg, client.MergeFrom(orig)); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	metrics.APIWrites.WithLabelValues("config-status").Inc()
	return ctrl.Result{}, nil
}

// Check builds a run's plan and lists the reasons runs cannot start with it.
func Check(spec v1alpha1.AgentConfigSpec, overrides *v1alpha1.LimitOverrides, providers *agents.Providers) (*workflow.Plan, field.ErrorList) {
	plan, errs := workflow.NewPlan(spec, overrides)
	for i, a := range spec.Agents {
		if _, err := providers.For(a.Model.Provider); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "agents").Index(i).Child("model", "provider"),
				a.Model.Provider, err.Error()))
		}
	}
	return plan, errs
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentConfig{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
