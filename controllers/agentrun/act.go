package agentrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/steps"
	"github.com/baton-dev/baton/internal/workflow"
)

// A reconcile gathers the run's facts, asks the core for the next action
// (workflow.NextAction) and carries it out; a Look, a Hold, a step started and a write that
// goes on decide again, with what changed. The order of the moves is the core's alone.

// maxPasses bounds the decisions of one reconcile: a run whose steps keep ending at once comes
// back, rather than holding a worker for ever.
const maxPasses = 256

// actor carries out one kind of action. It reports whether to decide again.
type actor func(r *Reconciler, ctx context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error)

// actors is what the shell does for each kind of action.
var actors = map[workflow.ActionKind]actor{
	workflow.Wait:         (*Reconciler).wait,
	workflow.Write:        (*Reconciler).writeAction,
	workflow.Hold:         (*Reconciler).holdAction,
	workflow.HoldLazily:   (*Reconciler).holdLazilyAction,
	workflow.WriteHeld:    (*Reconciler).writeAction,
	workflow.DeferHeld:    (*Reconciler).deferHeld,
	workflow.Look:         (*Reconciler).look,
	workflow.StartStep:    (*Reconciler).startStep,
	workflow.Admit:        (*Reconciler).admitAction,
	workflow.WriteQueued:  (*Reconciler).writeQueued,
	workflow.Begin:        (*Reconciler).beginAction,
	workflow.TakeDecision: (*Reconciler).takeDecision,
	workflow.Replaying:    (*Reconciler).replayingAction,
	workflow.MakeBranches: (*Reconciler).makeBranchesAction,
	workflow.WriteJoin:    (*Reconciler).writeJoin,
	workflow.Finish:       (*Reconciler).finish,
}

// drive decides and acts until an action waits, or the run comes back later.
func (r *Reconciler) drive(ctx context.Context, w *working) (ctrl.Result, error) {
	f, err := r.gather(ctx, w, r.Clock.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.driveFrom(ctx, w, f)
}

// driveFrom decides and acts from the facts gathered, then from what each action changed.
func (r *Reconciler) driveFrom(ctx context.Context, w *working, f workflow.Facts) (ctrl.Result, error) {
	for range maxPasses {
		a := workflow.NextAction(f)
		res, again, err := actors[a.Kind](r, ctx, w, &f, a)
		if err != nil || !again {
			return res, err
		}
		f.Status, f.Now, f.Held = w.Status, r.Clock.Now(), r.runs.heldWrite(w.AgentRun, r.StatusBatchPeriod)
	}
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// gather is what the core decides from that costs no lookup of its own: the run's annotations
// and status, what this process keeps of it, and whether Kueue took a started run's admission
// back. Lookups wait for the core to ask for them (look).
func (r *Reconciler) gather(ctx context.Context, w *working, now time.Time) (workflow.Facts, error) {
	trusted := r.Trust.Trusted(ctx)
	f := workflow.Facts{
		Now:     now,
		Status:  w.Status,
		Pending: pendingDecisions(ctx, w.AgentRun, trusted),
		Replay:  w.Spec.Replay != nil,
		Batch:   r.StatusBatchPeriod,
		Held:    r.runs.heldWrite(w.AgentRun, r.StatusBatchPeriod),
		Trusted: trusted,
	}
	f.Cancel, f.Cancelled = w.Annotations[v1alpha1.AnnotationCancel]
	_, _, f.Intake = rawDecision(w.AgentRun, now)
	if w.Status.Phase.Started() && !w.Status.Phase.Terminal() && !f.Cancelled {
		why, evicted, err := r.evicted(ctx, w.AgentRun)
		if err != nil {
			return f, err
		}
		f.Evicted, f.Eviction = evicted, why
	}
	return f, nil
}

// look answers what the core asked for: the run's plan, its step's state, the room it has at its
// namespace's cap, its branch runs.
func (r *Reconciler) look(ctx context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	switch a.Need {
	case workflow.NeedPlan:
		return r.lookPlan(ctx, w, f)
	case workflow.NeedStep:
		state, res, err := r.Steps.Next(ctx, w.AgentRun, a.Step)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		started := f.Step != nil && f.Step.Number == a.Step.Number && f.Step.Started
		f.Step = &workflow.StepFacts{Number: a.Step.Number, State: stepStates[state], Result: res, Started: started}
		if _, since, waiting := r.Steps.WaitingFor(w.AgentRun); waiting {
			f.Step.WaitingSince = since
			f.Step.WaitingFor, _ = r.waitingFor(w.AgentRun, f.Now)
		}
		f.Step.Released, _ = r.runs.peekRelease(w.AgentRun)
	case workflow.NeedRoom:
		room, err := r.roomForHeld(ctx, w, f.Now)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		f.Room = &room
	case workflow.NeedStart:
		return r.lookStart(ctx, w, f)
	case workflow.NeedBranches:
		runs, err := r.branchRuns(ctx, w)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		f.Branches = runs
	}
	return ctrl.Result{}, true, nil
}

// stepStates are the step runner's states as the core names them.
var stepStates = map[steps.State]workflow.StepState{
	steps.NotStarted: workflow.StepNotStarted,
	steps.Running:    workflow.StepRunning,
	steps.Waiting:    workflow.StepWaiting,
	steps.Ended:      workflow.StepEnded,
}

// lookPlan is the plan of a started run's pinned config.
func (r *Reconciler) lookPlan(ctx context.Context, w *working, f *workflow.Facts) (ctrl.Result, bool, error) {
	plan, err := r.pinnedPlan(ctx, w.AgentRun)
	switch {
	case errors.Is(err, errRevisionGone):
		f.PlanFailure = fmt.Sprintf("the pinned config %s no longer exists (the AgentConfig was deleted)", w.Status.ConfigRevision)
	case errors.Is(err, errPlanInvalid):
		f.PlanFailure = err.Error()
	case err != nil:
		return ctrl.Result{}, false, err
	}
	f.Plan = plan
	return ctrl.Result{}, true, nil
}

// wait comes back when the action says, or on an event.
func (r *Reconciler) wait(_ context.Context, _ *working, _ *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	return ctrl.Result{RequeueAfter: a.After}, false, nil
}

// writeAction hands the update to the status writer (handOff), and decides again when the core
// asked to: the run goes on from the status handed off, as from one written.
func (r *Reconciler) writeAction(ctx context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	if a.Applied {
		a.Update.Context = nil // the step's record holds it
	}
	res, err := r.handOff(ctx, w, f.Plan, a.Update)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if a.Applied {
		r.Steps.Consumed(w.AgentRun, a.Step.Number)
		r.runs.takeRelease(w.AgentRun)
	}
	if a.After > 0 && !w.Status.Phase.Terminal() {
		res.RequeueAfter = workflow.Soonest(res.RequeueAfter, a.After)
	}
	return res, a.GoOn, nil
}

// holdAction keeps the update to be written with the steps after it, and decides again.
func (r *Reconciler) holdAction(_ context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	r.runs.hold(w, a.Update.Status, f.Now)
	if a.Applied {
		r.Steps.Consumed(w.AgentRun, a.Step.Number)
		r.runs.takeRelease(w.AgentRun)
	}
	w.Status = a.Update.Status
	return ctrl.Result{}, true, nil
}

// holdLazilyAction keeps the update to go with the run's next write, and decides again.
func (r *Reconciler) holdLazilyAction(_ context.Context, w *working, _ *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	r.runs.holdLazily(w, a.Update.Status)
	w.Status = a.Update.Status
	return ctrl.Result{}, true, nil
}

// deferHeld puts the due write of what is held off, once, behind the runs whose steps ended.
func (r *Reconciler) deferHeld(_ context.Context, w *working, _ *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	r.runs.deferWrite(w.AgentRun)
	return ctrl.Result{RequeueAfter: a.After, Priority: ptr.To(handler.LowPriority)}, false, nil
}

// startStep starts the run's next step in the step runner, and decides again.
func (r *Reconciler) startStep(ctx context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	if r.StatusBatchPeriod <= 0 && r.runs.awaitWrite(w.AgentRun) {
		return ctrl.Result{}, false, nil // every step is written before the next starts: woken then
	}
	log.FromContext(ctx).V(2).Info("Starting step", "agentRun", klog.KObj(w), "step", a.Step.Number, "agent", a.Step.Agent)
	r.Steps.Start(w.AgentRun, f.Plan, a.Step)
	f.Step = &workflow.StepFacts{Number: a.Step.Number, State: workflow.StepStarted, Started: true}
	return ctrl.Result{}, true, nil
}

// takeDecision moves a decision annotation the webhook did not take into the run's queue.
func (r *Reconciler) takeDecision(ctx context.Context, w *working, f *workflow.Facts, _ workflow.Action) (ctrl.Result, bool, error) {
	annotations, d, _ := rawDecision(w.AgentRun, f.Now)
	return ctrl.Result{}, false, r.intake(ctx, w.AgentRun, annotations, d)
}

// replayingAction looks after a replay run's replay.
func (r *Reconciler) replayingAction(ctx context.Context, w *working, f *workflow.Facts, _ workflow.Action) (ctrl.Result, bool, error) {
	res, err := r.replaying(ctx, w, f.Now)
	return res, false, err
}

// makeBranchesAction makes the branch runs the status names that have none, off the worker
// (makeBranchesOff), and decides again once none is missing.
func (r *Reconciler) makeBranchesAction(ctx context.Context, w *working, f *workflow.Facts, _ workflow.Action) (ctrl.Result, bool, error) {
	if r.runs.awaitWrite(w.AgentRun) {
		return ctrl.Result{}, false, nil // made once the status naming them is written: woken then
	}
	if r.runs.creating(w.AgentRun) {
		return ctrl.Result{}, false, nil // woken once they are made
	}
	missing, err := r.branchesToMake(ctx, w, f.Branches)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if len(missing) > 0 {
		r.makeBranchesOff(ctx, w, f.Plan, f.Branches, missing)
		return ctrl.Result{}, false, nil
	}
	f.BranchesMade = true
	return ctrl.Result{}, true, nil
}

// writeJoin writes the join: when the run goes on, the join agent's whole input is in the
// transcript before the status that gives it. A join that needs no branch cancelled is handed
// to the writer; one that does is written here, and the branches no longer needed are cancelled
// once it is.
func (r *Reconciler) writeJoin(ctx context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	d := a.Update
	if a.GoOn {
		if _, err := r.Transcript.Append(ctx, records.JoinRecord(idOf(w.AgentRun), &d.Status, d.Status.Input, f.Now)); err != nil {
			return ctrl.Result{}, false, fmt.Errorf("writing the join's input to the transcript: %w", err)
		}
	}
	if len(a.Cancel) == 0 {
		res, err := r.handOff(ctx, w, f.Plan, d)
		f.Branches, f.BranchesMade = nil, false
		return res, a.GoOn && err == nil, err
	}
	res, written, err := r.store(ctx, w, f.Plan, d)
	if err != nil || !written {
		return res, false, err
	}
	if err := r.cancelBranches(ctx, w.AgentRun, a.Cancel, "the run joined without it"); err != nil {
		return ctrl.Result{}, false, err
	}
	f.Branches, f.BranchesMade = nil, false
	return res, a.GoOn, nil
}

// finish looks after a run that ended: a terminal run never changes again, whatever is
// annotated or edited later; it only goes away once its time to live has passed. What is kept
// of it goes once its branches are cancelled: the ones this process made are known by it.
func (r *Reconciler) finish(ctx context.Context, w *working, _ *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	if r.runs.awaitWrite(w.AgentRun) || r.runs.creating(w.AgentRun) {
		return ctrl.Result{}, false, nil // the end is written, and branches made, first: woken then
	}
	if w.ahead {
		// What is kept of the run goes once the cache shows its end (its watch event brings the
		// run back): until then, its parent's join reads the end from it (asHeld).
		return ctrl.Result{}, false, nil
	}
	defer r.forget(client.ObjectKeyFromObject(w))
	if err := r.finishWorkload(ctx, w.AgentRun, r.Clock.Now()); err != nil {
		return ctrl.Result{}, false, err
	}
	if err := r.cancelBranches(ctx, w.AgentRun, a.Cancel, "its parent run ended"); err != nil {
		return ctrl.Result{}, false, err
	}
	res, err := r.expire(ctx, w.AgentRun)
	return res, false, err
}
