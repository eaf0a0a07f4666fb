// Package agentrun is the AgentRun controller. It loads a run, has package steps take its
// agent steps one at a time, and writes what the workflow core decides: one status write per
// step (or per batch of steps that end close together), Events after the write.
package agentrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentconfig"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/controllers/agentsession"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/replay/worker"
	"github.com/baton-dev/baton/internal/steps"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/webhook"
	"github.com/baton-dev/baton/internal/workflow"
)

// errPlanInvalid means a running run's pinned config cannot run in this operator build.
var errPlanInvalid = errors.New("invalid plan")

// pendingIndex indexes the AgentRuns not yet started by the AgentConfig they name, so that a
// config that appears or changes starts the runs that wait for it. A started run is not in it:
// the index costs nothing per run at work.
const pendingIndex = "baton.pendingOnConfig"

func pendingOnConfig(o client.Object) []string {
	run, ok := o.(*v1alpha1.AgentRun)
	if !ok || run.Status.Phase.Started() {
		return nil
	}
	return []string{run.Spec.ConfigRef.Name}
}

// Config is what the AgentRun reconciler works with.
type Config struct {
	Client client.Client
	// APIReader reads past the cache: the ControllerRevisions a run pins, right after their
	// creation.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Clock     clock.Clock
	Providers *agents.Providers
	// Secrets reads the API keys agents need.
	Secrets agents.SecretReader
	// Transcript is the store of runs' records.
	Transcript transcript.Store
	// Ledger holds what each namespace's model calls spent and reserved, for its quotas.
	Ledger *ledger.Ledger
	// Steps runs the runs' agent steps.
	Steps *steps.Runner
	// Trust says whether the decision queue and creators are the admission webhook's (nil:
	// never; decisions are recorded unverified and no run's creator is known).
	Trust *webhook.Trust
	// MaxConcurrentReconciles is the number of reconcile workers.
	MaxConcurrentReconciles int
	// StatusBatchPeriod is how long a run's status may wait to be written with the steps that
	// end after it, while the run goes on (0: every step is written when it ends). Every step
	// is in the transcript as it ends either way.
	StatusBatchPeriod time.Duration
	// Forget, when set, is told of each run the reconciler drops (it ended or is gone), so
	// that what others keep of it goes too.
	Forget func(types.NamespacedName)
	// Kueue says that the cluster serves Kueue's Workloads (KueueServed): runs labelled with a
	// LocalQueue are admitted by Kueue, and the reconciler watches their Workloads. Without
	// it, a labelled run waits Queued, saying that Kueue is not installed.
	Kueue bool
	// Replays bounds the replays of runs with spec.replay (replay.go).
	Replays ReplayConfig
}

// Reconciler advances AgentRuns one agent step per reconcile.
type Reconciler struct {
	client.Client
	Config
	// runs holds what the reconciler keeps in memory of each run it works on (runs.go).
	runs       *runTable
	revisions  *revisions
	admissions *admissions
	// replays runs the replays of runs with spec.replay, outside the reconcile (replay.go).
	replays *worker.Pool[replayed]
	// caps are the namespaces' quotas' caps, worked out once per change of them.
	caps *agentquota.CapsCache
	// writer writes the statuses reconciles hand off (writer.go).
	writer *statusWriter
	// creators bounds the fan-outs whose branch runs are being made at once (makeBranchesOff).
	creators chan struct{}
}

// New builds the reconciler. Its status writer writes once the manager starts it
// (SetupWithManager).
func New(cfg Config) *Reconciler {
	r := &Reconciler{Client: cfg.Client, Config: cfg, runs: newRunTable(), revisions: newRevisions(cfg.Client, cfg.APIReader, cfg.Scheme),
		admissions: newAdmissions(), replays: worker.New[replayed](worker.Limits{InFlight: cfg.Replays.InFlight, PerNamespace: cfg.Replays.PerNamespace}),
		caps: &agentquota.CapsCache{}}
	r.writer = newStatusWriter(cfg.MaxConcurrentReconciles, r.writeOut)
	r.creators = make(chan struct{}, max(cfg.MaxConcurrentReconciles, 1))
	return r
}

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile takes a run one step further: it starts the run, starts its next step, or applies
// the step that just ended, and stores the status once (most often handed to the status
// writer). A run comes back at normal priority unless the reconcile asks for less.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcile(ctx, req)
	if result.Priority == nil {
		result.Priority = ptr.To(0)
	}
	return result, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &v1alpha1.AgentRun{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	w, err := r.load(ctx, cached)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.drive(ctx, w)
	if err == nil && r.runs.rearm(w) {
		r.writer.add(w.AgentRun) // a write refused for a conflict, decided again on this copy
	}
	return res, err
}

// waitingFor says what the run's step waits for, and for how long, if it waits for capacity.
func (r *Reconciler) waitingFor(run *v1alpha1.AgentRun, now time.Time) (string, bool) {
	key, since, waiting := r.Steps.WaitingFor(run)
	if !waiting {
		return "", false
	}
	return fmt.Sprintf("the capacity of %s %s (waiting %s)", key.Kind, key.Name, now.Sub(since).Round(time.Second)), true
}

// stillWaiting keeps a run's RateLimited condition in the status about to be written when the
// status it replaces said so and the run's step waits again: the steps' own writes then carry
// the condition, and it costs none of its own. A run whose step does not wait reads Running.
func (r *Reconciler) stillWaiting(w *working, st v1alpha1.AgentRunStatus, now time.Time) v1alpha1.AgentRunStatus {
	if st.Phase != v1alpha1.PhaseRunning || workflow.IsRateLimited(&st) || !workflow.IsRateLimited(&w.stored) {
		return st
	}
	what, waiting := r.waitingFor(w.AgentRun, now)
	if !waiting {
		return st
	}
	return workflow.RateLimited(st, what, now).Status
}

// forget drops what the reconciler holds for a run that ended or is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.runs.forget(key)
	r.admissions.forget(key)
	r.Steps.Forget(key)
	r.replays.Forget(key)
	if r.Forget != nil {
		r.Forget(key)
	}
}

// pinnedPlan is the run's plan from the config it pinned at start, built once per run.
func (r *Reconciler) pinnedPlan(ctx context.Context, run *v1alpha1.AgentRun) (*workflow.Plan, error) {
	if p := r.runs.plan(run); p != nil {
		return p, nil
	}
	limits := startedLimits(run)
	plan, ok := r.revisions.shared(run.Namespace, run.Status.ConfigRevision, limits)
	if !ok {
		spec, err := r.revisions.spec(ctx, run.Namespace, run.Status.ConfigRevision)
		if err != nil {
			return nil, err
		}
		var errs field.ErrorList
		if plan, errs = agentconfig.Check(*spec, limits, r.Providers); len(errs) > 0 {
			return nil, fmt.Errorf("%w: pinned config %s cannot run: %w", errPlanInvalid, run.Status.ConfigRevision, errs.ToAggregate())
		}
		plan = r.revisions.share(run.Namespace, run.Status.ConfigRevision, limits, plan)
	}
	plan, err := r.withEarlierTurns(ctx, r.forRun(ctx, plan, run), run)
	if err != nil {
		return nil, err
	}
	r.runs.setPlan(run, plan)
	return plan, nil
}

// requeueAtDeadline brings a running run back when its timeout expires, so the timeout needs
// no polling.
func (r *Reconciler) requeueAtDeadline(plan *workflow.Plan, run *v1alpha1.AgentRun, now time.Time) ctrl.Result {
	if plan == nil || run.Status.Phase.Terminal() {
		return ctrl.Result{}
	}
	deadline, ok := workflow.Deadline(plan, &run.Status)
	if !ok {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(deadline.Sub(now), 0) + time.Millisecond}
}

// SetupWithManager registers the controller: it watches AgentRuns, the AgentConfigs that
// Pending runs wait for, and the ends of steps.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.AgentRun{}, pendingIndex, pendingOnConfig); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.AgentRun{}, metrics.WaitingIndex, metrics.WaitingAtGate); err != nil {
		return err
	}
	if err := agentquota.Index(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := agentsession.AddIndex(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := mgr.Add(r.writer); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentRun{}).
		Watches(&v1alpha1.AgentConfig{}, handler.EnqueueRequestsFromMapFunc(r.runsWaitingFor),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Steps.Woken(), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.replays.Woken(), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.writer.Woken(), &handler.EnqueueRequestForObject{})).
		Watches(&v1alpha1.AgentRun{}, handler.EnqueueRequestsFromMapFunc(r.queuedBehind), builder.WithPredicates(endedPredicate())).
		// A turn that ended lets the next turn of its session start; a session that changed
		// (created, ended) brings back the turns that wait for it.
		Watches(&v1alpha1.AgentRun{}, handler.EnqueueRequestsFromMapFunc(r.sessionTurns), builder.WithPredicates(endedPredicate())).
		Watches(&v1alpha1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(r.sessionTurns)).
		// A namespace's quotas raised or deleted bring back the runs they held.
		Watches(&v1alpha1.AgentQuota{}, handler.EnqueueRequestsFromMapFunc(r.quotasChanged)).
		// A branch's phase changes bring its parent back, for the join.
		Owns(&v1alpha1.AgentRun{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: branchPhaseChanged}))
	if r.Kueue {
		// Kueue's admission and eviction of a run's Workload bring the run back at once.
		b = b.Owns(&kueuev1beta2.Workload{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: workloadDecided}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Complete(r)
}

// runsWaitingFor maps an AgentConfig to the runs that wait for it to start.
func (r *Reconciler) runsWaitingFor(ctx context.Context, cfg client.Object) []reconcile.Request {
	runs := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, runs, client.InNamespace(cfg.GetNamespace()), client.MatchingFields{pendingIndex: cfg.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Listing runs of an AgentConfig", "agentConfig", klog.KObj(cfg))
		return nil
	}
	var reqs []reconcile.Request
	for _, run := range runs.Items {
		if !run.Status.Phase.Started() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&run)})
		}
	}
	return reqs
}
