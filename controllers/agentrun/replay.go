package agentrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentconfig"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/replay/stored"
	"github.com/baton-dev/baton/internal/replay/worker"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run with spec.replay replays a recorded run of its namespace on its config as it is now
// (internal/replay): each agent answers with its recorded turns; no agent or tool is called, so
// the run counts no tokens or cost of its own. It is admitted as any run is (its namespace's
// quotas, Kueue) and is Running while it replays. The replay runs outside the reconcile
// (internal/replay/worker), a few at a time, reading the recorded run's transcript within the
// operator's byte budget and holding what it compares, not what the agents said
// (internal/replay/stored); when it ends, the run is woken and ends Succeeded with reason
// Replayed, status.replay saying what it found and its handoff sequence the replayed one, or
// Failed with ReplayBudgetExceeded past the budget. Each replay begun is counted in status
// before it reads (workflow.StartReplay), so that one the operator stopped during is begun
// again a bounded number of times (workflow.ResumeReplay).

// ReplayConfig bounds the replays the reconciler runs.
type ReplayConfig struct {
	// MaxReadBytes is the most bytes of transcripts one replay reads, its branch runs'
	// included (0: no bound).
	MaxReadBytes int64
	// InFlight and PerNamespace bound the replays running at once, in all and per namespace.
	InFlight, PerNamespace int
}

// replayed is what one replay found, and how much it read.
type replayed struct {
	report replay.Report
	read   int64
}

// replayStartFacts gathers what a replay run's start depends on: spec.replay must be followable
// (the recorded run exists, and the replay goes with neither spec.from nor spec.branch), and
// the config it pins. A replay calls no agent: it needs no Secret. It runs under the recorded
// run's limits and approvals, as kubectl baton replay does.
func (r *Reconciler) replayStartFacts(ctx context.Context, w *working) (workflow.StartFacts, error) {
	if w.Spec.From != nil || w.Spec.Branch != nil {
		return workflow.StartFacts{Problem: "spec.replay replays a recorded run from its start: it goes with neither spec.from nor spec.branch"}, nil
	}
	recorded, problem, err := r.recordedRun(ctx, w)
	if problem != "" || err != nil {
		return workflow.StartFacts{Problem: problem}, err
	}
	w.start.recorded = recorded
	return r.configFacts(ctx, w, startedLimits(recorded), false)
}

// recordedRun is the run spec.replay names; problem says why there is none.
func (r *Reconciler) recordedRun(ctx context.Context, w *working) (*v1alpha1.AgentRun, string, error) {
	name := w.Spec.Replay.Run
	recorded := &v1alpha1.AgentRun{}
	err := r.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: name}, recorded)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("spec.replay: run %s does not exist in namespace %s", name, w.Namespace), nil
	}
	if err != nil {
		return nil, "", err
	}
	return recorded, "", nil
}

// forRecorded is plan as the recorded run ran: its approvals, judged against its creator; a
// branch run from its agent, as deep as it was.
func (r *Reconciler) forRecorded(ctx context.Context, plan *workflow.Plan, run, recorded *v1alpha1.AgentRun) *workflow.Plan {
	plan = plan.ForRun(run.Name, run.Namespace, recorded.Spec.Approvals, r.creatorOf(ctx, recorded))
	if b := recorded.Spec.Branch; b != nil {
		plan = plan.AsBranch(b.Agent, b.Depth)
	}
	return plan
}

// beginReplay writes d, the run Running with the replay it begins counted, and, once that is
// written, begins the replay: an operator that stops during it finds the count.
func (r *Reconciler) beginReplay(ctx context.Context, w *working, plan *workflow.Plan, recorded *v1alpha1.AgentRun, d workflow.Update) (ctrl.Result, error) {
	res, written, err := r.store(ctx, w, nil, d)
	if !written || err != nil || w.Status.Phase != v1alpha1.PhaseRunning {
		return res, err
	}
	log.FromContext(ctx).V(2).Info("Beginning a replay", "agentRun", klog.KObj(w), "recorded", recorded.Name, "attempt", w.Status.Replay.Attempts)
	r.replays.Start(client.ObjectKeyFromObject(w), w.UID, r.replayOf(plan, recorded.DeepCopy()))
	return res, nil
}

// replayOf is the replay of the recorded run on plan, as the worker runs it.
func (r *Reconciler) replayOf(plan *workflow.Plan, recorded *v1alpha1.AgentRun) worker.Work[replayed] {
	return func(ctx context.Context) (replayed, error) {
		budget := &stored.Budget{Max: r.Replays.MaxReadBytes}
		rec, err := stored.Read(ctx, r.Transcript, recorded, r.branchRunsOf, budget)
		if err != nil {
			return replayed{read: budget.Read()}, err
		}
		report := replay.Run(plan, rec, replay.Options{})
		return replayed{report: report, read: budget.Read()}, report.Err
	}
}

// branchRunsOf lists the branch runs of run's fan-outs: only those it controls and named as
// its fan-outs name them.
func (r *Reconciler) branchRunsOf(ctx context.Context, run *v1alpha1.AgentRun) ([]v1alpha1.AgentRun, error) {
	list, err := r.labelledBranches(ctx, run)
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.AgentRun
	for i := range list.Items {
		if workflow.IsBranchOf(&list.Items[i], run) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// replaying is a started replay run: its replay waits or runs (nothing to do until it wakes
// the run), ended (the run ends with what it found), or is not under way in this operator,
// which began it again or ends the run (resumeReplay).
func (r *Reconciler) replaying(ctx context.Context, w *working, now time.Time) (ctrl.Result, error) {
	state, found, err := r.replays.State(client.ObjectKeyFromObject(w), w.UID)
	switch state {
	case worker.Waiting, worker.Running:
		return ctrl.Result{}, nil
	case worker.None:
		return r.resumeReplay(ctx, w, "the operator stopped during it", now)
	}
	if d, ended := endReplay(w.Status, found, err, r.Replays.MaxReadBytes, now); ended {
		return r.write(ctx, w, nil, d)
	}
	// The replay could not read what it needed, for a reason another may not meet.
	var panicked *worker.PanicError
	if errors.As(err, &panicked) {
		log.FromContext(ctx).Error(err, "A replay failed", "agentRun", klog.KObj(w), "stack", string(panicked.Stack))
		r.replays.Forget(client.ObjectKeyFromObject(w))
		return r.resumeReplay(ctx, w, "it failed on an internal error, which the operator's log shows", now)
	}
	log.FromContext(ctx).Error(err, "A replay could not read the transcript store", "agentRun", klog.KObj(w))
	r.replays.Forget(client.ObjectKeyFromObject(w))
	return r.resumeReplay(ctx, w, "it could not read the transcript store, as the operator's log shows", now)
}

// resumeReplay begins the replay again of a run whose last one did not end, for the reason
// why says, while it may; past that the run ends saying so (workflow.ResumeReplay).
func (r *Reconciler) resumeReplay(ctx context.Context, w *working, why string, now time.Time) (ctrl.Result, error) {
	d, again := workflow.ResumeReplay(w.Status, why, now)
	if !again {
		return r.write(ctx, w, nil, d)
	}
	recorded, problem, err := r.recordedRun(ctx, w)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case problem != "":
		return r.write(ctx, w, nil, workflow.Fail(w.Status, v1alpha1.ReasonConfigInvalid, problem, now))
	}
	spec, err := r.revisions.spec(ctx, w.Namespace, w.Status.ConfigRevision)
	switch {
	case errors.Is(err, errRevisionGone):
		return r.write(ctx, w, nil, workflow.Fail(w.Status, v1alpha1.ReasonConfigInvalid,
			fmt.Sprintf("the pinned config %s no longer exists (the AgentConfig was deleted)", w.Status.ConfigRevision), now))
	case err != nil:
		return ctrl.Result{}, err
	}
	plan, errs := agentconfig.Check(*spec, quota.Overrides(startedLimits(recorded), w.Status.Limits), r.Providers)
	if len(errs) > 0 {
		return r.write(ctx, w, nil, workflow.Fail(w.Status, v1alpha1.ReasonConfigInvalid,
			fmt.Sprintf("pinned config %s cannot run: %v", w.Status.ConfigRevision, errs.ToAggregate()), now))
	}
	return r.beginReplay(ctx, w, r.forRecorded(ctx, plan, w.AgentRun, recorded), recorded, d)
}

// endReplay is how a replay run ends once its replay ended with found, or err: with what the
// replay found, past its byte budget, or on a recorded run it cannot replay. ended is false for
// an error that says nothing of the recorded run (the store could not be read): another replay
// may find what this one could not.
func endReplay(st v1alpha1.AgentRunStatus, found replayed, err error, budget int64, now time.Time) (workflow.Update, bool) {
	recorded := st.Replay.Run
	var exceeded *stored.ExceededError
	var unreadable *stored.RecordingError
	switch {
	case errors.As(err, &exceeded) && exceeded.Bound != "":
		return workflow.Fail(st, v1alpha1.ReasonReplayBudgetExceeded, "spec.replay: "+exceeded.Bound, now), true
	case errors.As(err, &exceeded):
		return workflow.Fail(st, v1alpha1.ReasonReplayBudgetExceeded, fmt.Sprintf(
			"spec.replay: the replay of run %s read %s of its transcripts (its branch runs' included), more than the %s a replay may read (the operator's --replay-max-read-bytes); it stopped there",
			recorded, stored.Bytes(exceeded.Read), stored.Bytes(budget)), now), true
	case errors.As(err, &unreadable):
		return workflow.Fail(st, v1alpha1.ReasonConfigInvalid, "spec.replay: "+err.Error(), now), true
	case err != nil:
		return workflow.Update{}, false
	}
	report := found.report
	d := workflow.Fail(st, v1alpha1.ReasonReplayed, report.Message(recorded), now)
	d.Status.Replay = report.Status(recorded)
	d.Status.Replay.Attempts = st.Replay.Attempts
	d.Status.HandoffSequence = report.Replayed.Path[max(0, len(report.Replayed.Path)-workflow.HistoryLength):]
	return d, true
}
