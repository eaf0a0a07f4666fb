package agentrun

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run starts once its config, its Secrets and its model endpoints are there and its quotas
// and Kueue admit it (admission.go, kueue.go); until then it waits Pending or Queued, saying
// for what.

// startGrace is how long a run's start waits to be written with its first step's result. A
// run whose first step ends sooner is started and advanced in one status write; one whose
// first step takes longer reads Running once the grace has passed.
const startGrace = 3 * time.Second

// start pins the run's config and starts the run, or keeps it Pending until the config exists.
func (r *Reconciler) start(ctx context.Context, w *working, now time.Time) (ctrl.Result, error) {
	run := w.AgentRun
	if run.Spec.Replay != nil {
		return r.startReplay(ctx, w, now)
	}
	if run.Spec.Branch != nil {
		return r.startBranch(ctx, w, now)
	}
	if run.Spec.From != nil {
		return r.startFrom(ctx, w, now)
	}
	cfg := &v1alpha1.AgentConfig{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.ConfigRef.Name}, cfg)
	if apierrors.IsNotFound(err) {
		return r.write(ctx, w, nil, workflow.WaitForConfig(run.Status, run.Spec.ConfigRef.Name, now))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	plan, limits, bounds, errs, err := r.boundPlan(ctx, run.Namespace, cfg.Spec, run.Spec.Limits)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(errs) > 0 {
		return r.write(ctx, w, nil, workflow.Fail(run.Status, v1alpha1.ReasonConfigInvalid,
			fmt.Sprintf("AgentConfig %s cannot run: %v", cfg.Name, errs.ToAggregate()), now))
	}
	if problem := r.missingSecret(ctx, run.Namespace, plan); problem != "" {
		_, err := r.write(ctx, w, nil, workflow.WaitForSecret(run.Status, problem, now))
		return ctrl.Result{RequeueAfter: secretRetry}, err
	}
	if res, ok, err := r.admitOrQueue(ctx, w, now); !ok {
		return res, err
	}
	revision, err := r.revisions.pin(ctx, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	run.Status.Limits = bounds
	return r.begin(ctx, w, r.forRun(ctx, r.revisions.share(run.Namespace, revision, limits, plan), run), revision, now)
}

// begin starts a run that may start on its plan, pinned as revision, and takes it as far as
// it goes. The start is written with the first step's result (or once startGrace has passed):
// starting a run costs no write of its own. Should the operator stop before that write, the run
// is still Pending and starts again; its first step, if it ended, is applied from the
// transcript.
func (r *Reconciler) begin(ctx context.Context, w *working, plan *workflow.Plan, revision string, now time.Time) (ctrl.Result, error) {
	run := w.AgentRun
	d := workflow.Start(plan, run.Status, run.Spec.Input, revision, now)
	if d.Status.Phase != v1alpha1.PhaseRunning {
		return r.write(ctx, w, plan, d)
	}
	r.runs.hold(w, d.Status, now)
	run.Status = d.Status
	r.runs.setPlan(run, plan)
	w.begun = true
	return ctrl.Result{}, nil
}

// secretRetry is how often a run waiting for a Secret looks again: Secrets are not watched.
const secretRetry = 5 * time.Second

// missingSecret says which Secret an agent of the plan needs and cannot have, if any.
func (r *Reconciler) missingSecret(ctx context.Context, namespace string, plan *workflow.Plan) string {
	for _, a := range plan.Spec.Agents {
		if e := a.Model.EndpointRef; e != nil {
			if problem := r.missingEndpoint(ctx, namespace, a.Name, e); problem != "" {
				return problem
			}
			continue
		}
		ref := a.Model.APIKeySecretRef
		if ref == nil || a.Model.Provider == v1alpha1.ProviderScripted {
			continue
		}
		if _, err := r.Secrets.SecretKey(ctx, namespace, ref.Name, ref.Key); err != nil {
			return fmt.Sprintf("agent %s needs its API key: %v", a.Name, err)
		}
	}
	return ""
}

// missingEndpoint says why an agent's model endpoint, or the Secret of its key, cannot be had,
// if it cannot.
func (r *Reconciler) missingEndpoint(ctx context.Context, namespace, agent string, ref *v1alpha1.EndpointReference) string {
	if r.Steps.Endpoints == nil {
		return fmt.Sprintf("agent %s names a model endpoint, and this operator resolves none", agent)
	}
	e, err := r.Steps.Endpoints.Resolve(ctx, namespace, ref)
	if err != nil {
		return fmt.Sprintf("agent %s needs its model endpoint: %v", agent, err)
	}
	if e.Secret == nil {
		return ""
	}
	if _, err := r.Secrets.SecretKey(ctx, e.SecretNamespace, e.Secret.Name, e.Secret.Key); err != nil {
		return fmt.Sprintf("agent %s needs the API key of %s %s: %v", agent, e.Key.Kind, e.Key.Name, err)
	}
	return ""
}
