package agentrun

import (
	"context"
	"errors"
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
// for what. The shell gathers the facts (lookStart, then the Admit action); the core decides
// (workflow.NextAction, StartGate).

// startGrace is how long a run's start waits to be written with its first step's result. A
// run whose first step ends sooner is started and advanced in one status write; one whose
// first step takes longer reads Running once the grace has passed.
const startGrace = 3 * time.Second

// starting is what a Pending run's start gathered and would pin, kept from the Look that
// gathered it to the Begin that pins it.
type starting struct {
	// pin is the config the run would pin, and its plan under the run's bounded limits.
	pin pinnable
	// recorded is the run a replay replays; earlier is the run a start from a step continues.
	recorded, earlier *v1alpha1.AgentRun
	// plan and revision are a branch run's: its parent's.
	plan     *workflow.Plan
	revision string
	// taint is what the run inherits: its parent's, for a branch run.
	taint *v1alpha1.Taint
}

// pinnable is the config a run would pin, and its plan under the run's bounded limits.
type pinnable struct {
	cfg    *v1alpha1.AgentConfig
	plan   *workflow.Plan
	limits *v1alpha1.LimitOverrides
	bounds *v1alpha1.EffectiveLimits
}

// lookStart gathers what a Pending run's start waits on, and decides again.
func (r *Reconciler) lookStart(ctx context.Context, w *working, f *workflow.Facts) (ctrl.Result, bool, error) {
	s, err := r.startFacts(ctx, w)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	f.Start = &s
	return ctrl.Result{}, true, nil
}

// startFacts gathers what the run's start waits on by the kind of its start (a replay, a
// branch, a start from an earlier run's step, a turn or a run of its own), and keeps what it
// would pin in w.start.
func (r *Reconciler) startFacts(ctx context.Context, w *working) (workflow.StartFacts, error) {
	run := w.AgentRun
	w.start = &starting{}
	switch {
	case run.Spec.Replay != nil:
		return r.replayStartFacts(ctx, w)
	case run.Spec.Branch != nil:
		return r.branchStartFacts(ctx, w)
	case run.Spec.From != nil:
		earlier, err := r.earlierRun(ctx, run)
		if errors.Is(err, errFrom) {
			return workflow.StartFacts{Problem: err.Error()}, nil
		}
		if err != nil {
			return workflow.StartFacts{}, err
		}
		w.start.earlier = earlier
	}
	return r.configFacts(ctx, w, run.Spec.Limits, true)
}

// configFacts gathers what a run that pins the config as it is now waits on (workflow.StartGate:
// its config, its session, the Secrets of agents it calls), and keeps the config it would pin
// with the run's plan under these limits, bounded by the namespace's runLimits. A run whose
// agents are called (calls) waits for the Secrets their keys are in.
func (r *Reconciler) configFacts(ctx context.Context, w *working, limits *v1alpha1.LimitOverrides, calls bool) (workflow.StartFacts, error) {
	run := w.AgentRun
	f := workflow.StartFacts{Config: run.Spec.ConfigRef.Name}
	session, err := r.sessionFacts(ctx, w)
	if err != nil {
		return f, err
	}
	f.Session = session
	cfg := &v1alpha1.AgentConfig{}
	err = r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.ConfigRef.Name}, cfg)
	if apierrors.IsNotFound(err) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	f.ConfigFound = true
	plan, bounded, bounds, errs, err := r.boundPlan(ctx, run.Namespace, cfg.Spec, limits, w.turn)
	if err != nil {
		return f, err
	}
	if len(errs) > 0 {
		f.Invalid = fmt.Sprintf("AgentConfig %s cannot run: %v", cfg.Name, errs.ToAggregate())
		return f, nil
	}
	w.start.pin = pinnable{cfg: cfg, plan: plan, limits: bounded, bounds: bounds}
	if calls {
		f.MissingSecret = r.missingSecret(ctx, run.Namespace, plan)
	}
	return f, nil
}

// beginAction starts a Pending run that nothing holds, and decides again when the start is
// held to be written with the first step's result, or when the start from an earlier run's
// step finds it cannot be.
func (r *Reconciler) beginAction(ctx context.Context, w *working, f *workflow.Facts, _ workflow.Action) (ctrl.Result, bool, error) {
	w.begun = false
	res, err := r.start(ctx, w, f.Now)
	if errors.Is(err, errFrom) {
		f.Start.Problem = err.Error()
		return ctrl.Result{}, true, nil
	}
	return res, err == nil && w.begun, err
}

// start pins what the run's start gathered and starts the run by the kind of its start.
func (r *Reconciler) start(ctx context.Context, w *working, now time.Time) (ctrl.Result, error) {
	run, s := w.AgentRun, w.start
	if run.Spec.Branch != nil {
		inherit(run, s.taint)
		return r.begin(ctx, w, s.plan, s.revision, now)
	}
	plan, revision, err := r.pin(ctx, w)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case run.Spec.Replay != nil:
		return r.beginReplay(ctx, w, r.forRecorded(ctx, plan, run, s.recorded), s.recorded,
			workflow.StartReplay(run.Status, s.recorded.Name, revision, now))
	case run.Spec.From != nil:
		return r.startFrom(ctx, w, plan, revision, now)
	}
	return r.begin(ctx, w, plan, revision, now)
}

// pin pins the config the run's start gathered, and returns the run's plan under its bounded
// limits (its status.limits says which) and the revision pinned.
func (r *Reconciler) pin(ctx context.Context, w *working) (*workflow.Plan, string, error) {
	run, p := w.AgentRun, w.start.pin
	revision, err := r.revisions.pin(ctx, p.cfg)
	if err != nil {
		return nil, "", err
	}
	run.Status.Limits = p.bounds
	return r.forRun(ctx, r.revisions.share(run.Namespace, revision, p.limits, p.plan), run), revision, nil
}

// begin starts a run that may start on its plan, pinned as revision, and takes it as far as
// it goes. The start is written with the first step's result (or once startGrace has passed):
// starting a run costs no write of its own. Should the operator stop before that write, the run
// is still Pending and starts again; its first step, if it ended, is applied from the
// transcript.
func (r *Reconciler) begin(ctx context.Context, w *working, plan *workflow.Plan, revision string, now time.Time) (ctrl.Result, error) {
	run := w.AgentRun
	if w.turn != nil {
		inherit(run, w.turn.taint)
	}
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

// inherit starts the run tainted as what it comes from was, if it was (workflow.Inherited).
func inherit(run *v1alpha1.AgentRun, t *v1alpha1.Taint) {
	if run.Status.Taint == nil && t != nil {
		run.Status.Taint = t.DeepCopy()
	}
}
