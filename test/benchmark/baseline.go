package benchmark

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// baselineController is the baseline's controller name, as controller-runtime's metrics label it.
const baselineController = "baselinerun"

// conflictRetry is how soon a run whose status write lost a race is tried again, as in Baton.
const conflictRetry = 200 * time.Millisecond

// baselineReconciler is the least any controller of multi-agent runs can do: read the run from
// the informer cache, take one handoff, and write it with one JSON merge patch of the status.
// A step's delay is waited for with RequeueAfter, never in a worker.
type baselineReconciler struct {
	client client.Client
	clock  clock.Clock
	// seen is when each run was first seen: the start of its first step. creationTimestamp is
	// kept to the second, which would start a first step up to a second early.
	seen sync.Map
}

// setupBaseline adds the baseline's controller to mgr.
func setupBaseline(mgr ctrl.Manager, workers int) error {
	r := &baselineReconciler{client: mgr.GetClient(), clock: clock.RealClock{}}
	return ctrl.NewControllerManagedBy(mgr).
		Named(baselineController).
		For(&BaselineRun{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// Reconcile takes the run's next handoff once its step's delay has passed.
func (r *baselineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	run := &BaselineRun{}
	if err := r.client.Get(ctx, req.NamespacedName, run); err != nil {
		r.seen.Delete(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if run.Status.Phase == baselineSucceeded {
		r.seen.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	now := r.clock.Now()
	began := r.stepStart(run, req.NamespacedName, now)
	if d := run.Spec.Delay; d != nil && d.Duration > 0 {
		if wait := began.Add(d.Duration).Sub(now); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	orig := run.DeepCopy()
	takeHandoff(&run.Status, run.Spec, began, now)
	if err := r.client.Status().Patch(ctx, run, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	// The write's watch event brings the run back for its next step.
	return ctrl.Result{}, nil
}

// stepStart is when the run's current step started: the end of the previous one, or when the
// run was first seen.
func (r *baselineReconciler) stepStart(run *BaselineRun, key types.NamespacedName, now time.Time) time.Time {
	if n := len(run.Status.History); n > 0 {
		return run.Status.History[n-1].Time.Time
	}
	first, _ := r.seen.LoadOrStore(key, now)
	return first.(time.Time)
}

// takeHandoff ends the current step: control passes to the next agent, or the run succeeds.
func takeHandoff(st *BaselineRunStatus, spec BaselineRunSpec, began, now time.Time) {
	k := st.Step + 1
	from := agentName(int(k - 1))
	st.Step = k
	st.CurrentAgent = agentName(int(k))
	st.LastOutput = outputText(from, int(spec.OutputBytes))
	st.History = append(st.History, BaselineHandoff{Step: k, From: from, To: st.CurrentAgent, Time: metav1.NewMicroTime(now)})
	st.History = append([]BaselineHandoff(nil), st.History[max(len(st.History)-baselineHistory, 0):]...)
	if st.Phase == "" {
		st.Phase = baselineRunning
		st.StartTime = &metav1.Time{Time: began}
	}
	if k >= spec.Steps {
		st.Phase = baselineSucceeded
		st.CompletionTime = &metav1.Time{Time: now}
	}
}

// agentName names the benchmark's i-th agent.
func agentName(i int) string { return fmt.Sprintf("a%d", i) }

// outputText is an agent's output of exactly size bytes (at least the agent's name).
func outputText(agent string, size int) string {
	head := agent + ": "
	if size <= len(head) {
		return agent
	}
	const filler = "finding "
	body := strings.Repeat(filler, (size-len(head))/len(filler)+1)
	return head + body[:size-len(head)]
}
