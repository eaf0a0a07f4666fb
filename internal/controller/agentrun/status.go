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
	"github.com/baton-dev/baton/internal/agents"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
)

// conflictRetry is how soon a run whose status write lost a race is tried again.
const conflictRetry = 200 * time.Millisecond

// write patches the run's status to the update, once, and emits the update's Events after
// the write succeeded. No change, no write. The patch carries the resourceVersion it was
// computed from, so an update made on a stale copy is refused rather than applied.
func (r *Reconciler) write(ctx context.Context, run *v1alpha1.AgentRun, plan *workflow.Plan, d workflow.Update) (ctrl.Result, error) {
	res, _, err := r.patchStatus(ctx, run, plan, d)
	return res, err
}

// patchStatus is write that also reports whether the update is now in the API server: false
// after a conflict, whose retry must decide again on a fresh copy.
func (r *Reconciler) patchStatus(ctx context.Context, run *v1alpha1.AgentRun, plan *workflow.Plan, d workflow.Update) (ctrl.Result, bool, error) {
	workflow.Observe(&d.Status, run.Generation)
	orig := run.DeepCopy()
	if base, held := r.runs.base(run); held {
		// What the run did lately is not written yet: the patch goes from what the API server
		// holds.
		orig.Status = base
	}
	// Status holds the beginnings of a long input and of the history; memory and the transcript
	// hold them whole. orig is made what the API server holds, the same way.
	whole, history := workflow.StoreStatus(&d.Status)
	workflow.StoreStatus(&orig.Status)
	if equality.Semantic.DeepEqual(orig.Status, d.Status) {
		r.runs.wrote(run) // nothing held is left to write
		return r.requeueAtDeadline(plan, run, r.Clock.Now()), true, nil
	}
	decided := d.Status.LastDecision != orig.Status.LastDecision && d.Status.InputDigest != ""
	if len(d.Context) > 0 || len(d.Decided) > 0 || decided {
		// People's decisions, feedback and replies, and the input they made, go to the
		// transcript before the status that applies them.
		kept := ""
		if decided {
			kept = whole
		}
		if _, err := r.Transcript.Append(ctx, records.DecisionBody{Decisions: d.Decided, Context: d.Context, Input: kept}.Record(idOf(run), &d.Status, r.Clock.Now())); err != nil {
			return ctrl.Result{}, false, fmt.Errorf("writing decisions to the transcript: %w", err)
		}
	}
	run.Status = d.Status
	if err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		run.Status = orig.Status
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(2).Info("Status write conflicted; retrying", "agentRun", klog.KObj(run))
			return ctrl.Result{RequeueAfter: conflictRetry}, false, nil
		}
		return ctrl.Result{}, false, err
	}
	metrics.APIWrites.WithLabelValues("status").Inc()
	r.runs.wrote(run)
	r.runs.keepInput(run, run.Status.InputDigest, whole)
	r.runs.keepHistory(run, history)
	for _, e := range d.Events {
		action := e.Action
		switch {
		case action != "":
		case e.Reason == string(run.Status.TerminationReason):
			action = "End"
		default:
			action = fmt.Sprintf("Step%d", run.Status.StepCount)
		}
		r.Recorder.Eventf(run, nil, e.Type, e.Reason, action, "%s", boundedBytes(e.Message, maxEventNote))
		metrics.APIWrites.WithLabelValues("event").Inc()
	}
	metrics.CountWrite(run, orig.Status, d.Guard, r.Clock.Now())
	if !orig.Status.Phase.Terminal() && run.Status.Phase.Terminal() {
		traceRun(run)
		log.FromContext(ctx).V(2).Info("Run ended", "agentRun", klog.KObj(run),
			"reason", run.Status.TerminationReason, "steps", run.Status.StepCount)
	}
	return r.requeueAtDeadline(plan, run, r.Clock.Now()), true, nil
}

// maxEventNote keeps Event notes under the API's 1 KiB limit.
const maxEventNote = 1000

// boundedBytes cuts s to at most n bytes on a character boundary.
func boundedBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return agents.BoundBytes(s, n-len("…")) + "…"
}
