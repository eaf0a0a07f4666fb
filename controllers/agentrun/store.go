package agentrun

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// conflictRetry is how soon a run whose status write lost a race is tried again.
const conflictRetry = 200 * time.Millisecond

// write stores the update as the run's status: see store.
func (r *Reconciler) write(ctx context.Context, w *working, plan *workflow.Plan, d workflow.Update) (ctrl.Result, error) {
	res, _, err := r.store(ctx, w, plan, d)
	return res, err
}

// store writes the update as the run's status, once, in the reconcile, and emits the update's
// Events after the write succeeded (state.go). The status is cut to what the API server keeps
// and patched against what it holds; no change, no write. The patch carries the resourceVersion
// it was computed from, so an update made on a stale copy is refused rather than applied. It
// reports whether the update is now in the API server: false after a conflict, whose retry
// must decide again on a fresh copy, and while a status handed off is not yet written (the
// writer wakes the run once it is). Afterwards the run holds the status written, whole.
func (r *Reconciler) store(ctx context.Context, w *working, plan *workflow.Plan, d workflow.Update) (ctrl.Result, bool, error) {
	if r.runs.awaitWrite(w.AgentRun) {
		return ctrl.Result{}, false, nil
	}
	p, changed, err := r.prepare(ctx, w, &d)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if !changed {
		return r.requeueAtDeadline(plan, w.AgentRun, r.Clock.Now()), true, nil
	}
	orig := w.DeepCopy()
	orig.Status = w.stored
	w.Status = p.stored
	if err := r.Status().Patch(ctx, w.AgentRun, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		w.Status = p.whole
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(2).Info("Status write conflicted; retrying", "agentRun", klog.KObj(w))
			return ctrl.Result{RequeueAfter: conflictRetry}, false, nil
		}
		return ctrl.Result{}, false, err
	}
	r.afterWrite(ctx, w.AgentRun, w.stored, d.Events, d.Guard)
	r.runs.wrote(w.AgentRun, p.input, p.history)
	w.stored, w.Status = w.Status, p.whole
	return r.requeueAtDeadline(plan, w.AgentRun, r.Clock.Now()), true, nil
}

// handOff stores the update as store does, but off the reconcile: the status writer writes it
// (writer.go), and the run goes on from it at once.
func (r *Reconciler) handOff(ctx context.Context, w *working, plan *workflow.Plan, d workflow.Update) (ctrl.Result, error) {
	p, changed, err := r.prepare(ctx, w, &d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		r.runs.handOff(w, p.stored, p.whole, p.input, p.history, d)
		r.writer.add(w.AgentRun)
		if p.whole.Phase.Terminal() && !w.stored.Phase.Terminal() {
			r.wakeParent(ctx, w.AgentRun)
		}
		w.stored, w.Status = p.stored, p.whole
	}
	return r.requeueAtDeadline(plan, w.AgentRun, r.Clock.Now()), nil
}

// prepared is an update's status ready to store: whole, and cut to what the API server keeps,
// with what the cut status holds only the beginning of.
type prepared struct {
	whole, stored v1alpha1.AgentRunStatus
	input         string
	history       []v1alpha1.HandoffRecord
}

// prepare makes the update's status ready to store, and reports whether it changes what the
// API server holds (or will, once what was handed off is written). A change's decisions are in
// the transcript before it returns; no change, and nothing held is left to write.
func (r *Reconciler) prepare(ctx context.Context, w *working, d *workflow.Update) (prepared, bool, error) {
	d.Status = r.stillWaiting(w, d.Status, r.Clock.Now())
	workflow.Observe(&d.Status, w.Generation)
	p := prepared{whole: d.Status, stored: *d.Status.DeepCopy()}
	p.input, p.history = workflow.StoreStatus(&p.stored)
	if equality.Semantic.DeepEqual(w.stored, p.stored) {
		r.runs.unhold(w.AgentRun)
		w.Status = p.whole
		return p, false, nil
	}
	if err := r.recordDecisions(ctx, w, *d, p.stored, p.input); err != nil {
		return p, false, err
	}
	return p, true, nil
}

// recordDecisions writes people's decisions, feedback and replies, and the input they made, to
// the transcript before the status that applies them.
func (r *Reconciler) recordDecisions(ctx context.Context, w *working, d workflow.Update, stored v1alpha1.AgentRunStatus, input string) error {
	decided := stored.LastDecision != w.stored.LastDecision && stored.InputDigest != ""
	if len(d.Context) == 0 && len(d.Decided) == 0 && !decided {
		return nil
	}
	kept := ""
	if decided {
		kept = input
	}
	rec := records.DecisionBody{Decisions: d.Decided, Context: d.Context, Input: kept}.Record(idOf(w.AgentRun), &stored, r.Clock.Now())
	if _, err := r.Transcript.Append(ctx, rec); err != nil {
		return fmt.Errorf("writing decisions to the transcript: %w", err)
	}
	return nil
}

// afterWrite is what follows a status write that succeeded: the run as written (its status cut)
// explained in its Events, counted, and, if it ended, traced and logged.
func (r *Reconciler) afterWrite(ctx context.Context, run *v1alpha1.AgentRun, before v1alpha1.AgentRunStatus, events []workflow.Event, guard string) {
	metrics.APIWrites.WithLabelValues("status").Inc()
	r.emit(run, events)
	metrics.CountWrite(run, before, guard, r.Clock.Now())
	if !before.Phase.Terminal() && run.Status.Phase.Terminal() {
		traceRun(run)
		log.FromContext(ctx).V(2).Info("Run ended", "agentRun", klog.KObj(run),
			"reason", run.Status.TerminationReason, "steps", run.Status.StepCount)
	}
}

// emit records the Events that explain the run's status, once it is written.
func (r *Reconciler) emit(run *v1alpha1.AgentRun, events []workflow.Event) {
	for _, e := range events {
		action := e.Action
		switch {
		case action != "":
		case e.Reason == string(run.Status.TerminationReason):
			action = "End"
		default:
			action = fmt.Sprintf("Step%d", run.Status.StepCount)
		}
		r.Recorder.Eventf(run, nil, e.Type, e.Reason, action, "%s", textbound.BytesMarked(e.Message, maxEventNote))
		metrics.APIWrites.WithLabelValues("event").Inc()
	}
}

// maxEventNote keeps Event notes under the API's 1 KiB limit.
const maxEventNote = 1000
