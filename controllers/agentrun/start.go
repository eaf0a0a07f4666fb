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
	plan, revision, res, err := r.pinCurrent(ctx, w, run.Spec.Limits, now, true)
	if plan == nil || err != nil {
		return res, err
	}
	return r.begin(ctx, w, plan, revision, now)
}

// pinCurrent pins the config as it is now for a run and returns the run's plan under these
// limits, bounded by the namespace's runLimits (the run's status.limits says which), and the
// revision pinned, once the run is admitted. Until then (workflow.StartGate: its config, its
// session, the Secrets of agents it calls, then its quotas and Kueue), the run waits or ends,
// and the result says so.
func (r *Reconciler) pinCurrent(ctx context.Context, w *working, limits *v1alpha1.LimitOverrides, now time.Time, calls bool) (*workflow.Plan, string, ctrl.Result, error) {
	run := w.AgentRun
	f, pinned, err := r.startFacts(ctx, w, limits, now, calls)
	if err != nil {
		return nil, "", ctrl.Result{}, err
	}
	switch d, wait := workflow.StartGate(f); wait {
	case workflow.StartGo:
	case workflow.StartWaitsForSecret:
		_, err := r.write(ctx, w, nil, d)
		return nil, "", ctrl.Result{RequeueAfter: secretRetry}, err
	default:
		res, err := r.write(ctx, w, nil, d)
		return nil, "", res, err
	}
	if res, ok, err := r.admitOrQueue(ctx, w, now); !ok {
		return nil, "", res, err
	}
	revision, err := r.revisions.pin(ctx, pinned.cfg)
	if err != nil {
		return nil, "", ctrl.Result{}, err
	}
	run.Status.Limits = pinned.bounds
	return r.forRun(ctx, r.revisions.share(run.Namespace, revision, pinned.limits, pinned.plan), run), revision, ctrl.Result{}, nil
}

// pinnable is the config a run would pin, and its plan under the run's bounded limits.
type pinnable struct {
	cfg    *v1alpha1.AgentConfig
	plan   *workflow.Plan
	limits *v1alpha1.LimitOverrides
	bounds *v1alpha1.EffectiveLimits
}

// startFacts gathers what the run's start waits on (workflow.StartGate), and the config it
// would pin. A run whose agents are called (calls) waits for the Secrets their keys are in.
func (r *Reconciler) startFacts(ctx context.Context, w *working, limits *v1alpha1.LimitOverrides, now time.Time, calls bool) (workflow.StartFacts, pinnable, error) {
	run := w.AgentRun
	f := workflow.StartFacts{Now: now, Status: run.Status, Config: run.Spec.ConfigRef.Name}
	var p pinnable
	session, err := r.sessionFacts(ctx, w)
	if err != nil {
		return f, p, err
	}
	f.Session = session
	cfg := &v1alpha1.AgentConfig{}
	err = r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.ConfigRef.Name}, cfg)
	if apierrors.IsNotFound(err) {
		return f, p, nil
	}
	if err != nil {
		return f, p, err
	}
	f.ConfigFound, p.cfg = true, cfg
	plan, bounded, bounds, errs, err := r.boundPlan(ctx, run.Namespace, cfg.Spec, limits, w.turn)
	if err != nil {
		return f, p, err
	}
	if len(errs) > 0 {
		f.Invalid = fmt.Sprintf("AgentConfig %s cannot run: %v", cfg.Name, errs.ToAggregate())
		return f, p, nil
	}
	p.plan, p.limits, p.bounds = plan, bounded, bounds
	if calls {
		f.MissingSecret = r.missingSecret(ctx, run.Namespace, plan)
	}
	return f, p, nil
}

// begin starts a run that may start on its plan, pinned as revision, and takes it as far as
// it goes. The start is written with the first step's result (or once startGrace has passed):
// starting a run costs no write of its own. Should the operator stop before that write, the run
// is still Pending and starts again; its first step, if it ended, is applied from the
// transcript.
func (r *Reconciler) begin(ctx context.Context, w *working, plan *workflow.Plan, revision string, now time.Time) (ctrl.Result, error) {
	run := w.AgentRun
	var d workflow.Update
	if w.turn == nil {
		d = workflow.Start(plan, run.Status, run.Spec.Input, revision, now)
	} else {
		digest, err := r.writeHistory(ctx, w, now)
		if err != nil {
			return ctrl.Result{}, err
		}
		if plan, err = r.withEarlier(ctx, plan, earlierTurns(run, digest, w.turn.others)); err != nil {
			return ctrl.Result{}, err
		}
		d = workflow.StartTurn(plan, run.Status, run.Spec.Input, revision, w.turn.state, now)
		d.Status.HistoryDigest = digest
	}
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
