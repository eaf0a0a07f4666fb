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

// store writes the update as the run's status, once, and emits the update's Events after the
// write succeeded (state.go). The status is cut to what the API server keeps and patched
// against what it holds; no change, no write. The patch carries the resourceVersion it was
// computed from, so an update made on a stale copy is refused rather than applied. It reports
// whether the update is now in the API server: false after a conflict, whose retry must decide
// again on a fresh copy. Afterwards the run holds the status written, whole.
func (r *Reconciler) store(ctx context.Context, w *working, plan *workflow.Plan, d workflow.Update) (ctrl.Result, bool, error) {
	d.Status = r.stillWaiting(w, d.Status, r.Clock.Now())
	workflow.Observe(&d.Status, w.Generation)
	whole := d.Status
	stored := *d.Status.DeepCopy()
	input, history := workflow.StoreStatus(&stored)
	if equality.Semantic.DeepEqual(w.stored, stored) {
		r.runs.unhold(w.AgentRun) // nothing held is left to write
		w.Status = whole
		return r.requeueAtDeadline(plan, w.AgentRun, r.Clock.Now()), true, nil
	}
	if err := r.recordDecisions(ctx, w, d, stored, input); err != nil {
		return ctrl.Result{}, false, err
	}
	orig := w.DeepCopy()
	orig.Status = w.stored
	w.Status = stored
	if err := r.Status().Patch(ctx, w.AgentRun, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		w.Status = whole
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(2).Info("Status write conflicted; retrying", "agentRun", klog.KObj(w))
			return ctrl.Result{RequeueAfter: conflictRetry}, false, nil
		}
		return ctrl.Result{}, false, err
	}
	metrics.APIWrites.WithLabelValues("status").Inc()
	r.runs.wrote(w.AgentRun, input, history)
	before := w.stored
	w.stored, w.Status = w.Status, whole
	r.emit(w, d.Events)
	metrics.CountWrite(w.AgentRun, before, d.Guard, r.Clock.Now())
	if !before.Phase.Terminal() && w.Status.Phase.Terminal() {
		traceRun(w.AgentRun)
		log.FromContext(ctx).V(2).Info("Run ended", "agentRun", klog.KObj(w),
			"reason", w.Status.TerminationReason, "steps", w.Status.StepCount)
	}
	return r.requeueAtDeadline(plan, w.AgentRun, r.Clock.Now()), true, nil
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

// emit records the update's Events, once the status that they explain is written.
func (r *Reconciler) emit(w *working, events []workflow.Event) {
	for _, e := range events {
		action := e.Action
		switch {
		case action != "":
		case e.Reason == string(w.Status.TerminationReason):
			action = "End"
		default:
			action = fmt.Sprintf("Step%d", w.Status.StepCount)
		}
		r.Recorder.Eventf(w.AgentRun, nil, e.Type, e.Reason, action, "%s", textbound.BytesMarked(e.Message, maxEventNote))
		metrics.APIWrites.WithLabelValues("event").Inc()
	}
}

// maxEventNote keeps Event notes under the API's 1 KiB limit.
const maxEventNote = 1000
