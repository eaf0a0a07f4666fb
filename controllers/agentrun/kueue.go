package agentrun

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/kueue"
	"github.com/baton-dev/baton/internal/quota"
)

// A run is Kueue's to admit when it is labelled with a Kueue LocalQueue (kueue.QueueLabel), or
// when an AgentQuota of its namespace says admission: Kueue (then an unlabelled run goes to the
// quotas' defaultQueue). Once its namespace's AgentQuotas leave it room, the reconciler makes
// the run's Workload (internal/kueue says what it holds and what Kueue's conditions on it mean),
// remembers it in the run's status (status.kueue: the queue, the priority class and the
// priority, clamped to the classes the namespace's quotas list), and keeps the run Queued until
// Kueue admits it. From then on the run is Kueue's whatever its labels say. The Workload is
// controlled by the run, and the reconciler watches it, so that Kueue's admission and eviction
// bring the run back at once. A started run whose Workload is evicted stops; a run that ends,
// however it ends, finishes its Workload, which gives its quota back to Kueue.

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloadpriorityclasses,verbs=get

// kueueAdmit decides whether Kueue admits a run the quotas let start: a run that is not Kueue's
// is admitted; one that is waits for its Workload, made here the first time, to be admitted. A
// queue no LocalQueue can have is an error the run ends for.
func (r *Reconciler) kueueAdmit(ctx context.Context, run *v1alpha1.AgentRun) (quota.Verdict, error) {
	caps, err := r.caps.Caps(ctx, r.Client, run.Namespace)
	if err != nil {
		return quota.Verdict{}, err
	}
	var all bool
	var defaultQueue, by string
	if caps != nil {
		all, defaultQueue, by = caps.Kueue, caps.DefaultQueue, caps.KueueBy
	}
	queue, ours := kueue.Route(run, all, defaultQueue)
	if !ours {
		return quota.Verdict{Admit: true}, nil
	}
	waiting := func(why string) quota.Verdict {
		return quota.Verdict{Reason: v1alpha1.ReasonAwaitingAdmission, Message: "Kueue: " + why}
	}
	if queue == "" {
		return waiting(fmt.Sprintf("quota %q makes Kueue admit every run of the namespace, and the run names no LocalQueue: label it %s, or set the quotas' defaultQueue",
			by, kueue.QueueLabel)), nil
	}
	if err := kueue.CheckQueueName(queue); err != nil {
		return quota.Verdict{}, errQueueInvalid{err}
	}
	if !r.Kueue {
		return waiting(fmt.Sprintf("the run is for LocalQueue %s, and this cluster serves no Kueue Workloads "+
			"(kueue.x-k8s.io/v1beta2) to admit it: install Kueue, then restart the operator", queue)), nil
	}
	wl, err := r.workload(ctx, run)
	if err != nil {
		return quota.Verdict{}, err
	}
	if wl == nil {
		return r.makeWorkload(ctx, run, queue, caps, waiting)
	}
	admitted, _, why := kueue.Admission(wl)
	if !admitted {
		return waiting(why), nil
	}
	// A new value, not a change in place: the status the run was read with shares its pointers,
	// and the write patches against that.
	k := v1alpha1.KueueAdmission{Workload: wl.Name, Queue: queue}
	if run.Status.Kueue != nil {
		k = *run.Status.Kueue
	}
	k.Admitted = true
	run.Status.Kueue = &k
	return quota.Verdict{Admit: true}, nil
}

// makeWorkload makes the run's Workload in queue, with the priority its namespace's quotas
// allow it, and remembers it in the run's status, which the Queued write carries.
func (r *Reconciler) makeWorkload(ctx context.Context, run *v1alpha1.AgentRun, queue string, caps *quota.Caps, waiting func(string) quota.Verdict) (quota.Verdict, error) {
	ask := kueue.Ask{Queue: queue, PriorityClass: run.Spec.PriorityClassName}
	var values map[string]int32
	if caps != nil && len(caps.PriorityClasses) > 0 {
		if ask.PriorityClass == "" {
			ask.PriorityClass = caps.PriorityClasses[0]
		}
		var missing string
		if values, missing = r.classValues(ctx, caps.PriorityClasses); missing != "" {
			return waiting(fmt.Sprintf("the namespace's quotas list WorkloadPriorityClass %s, which does not exist", missing)), nil
		}
	}
	ask.Priority = kueue.Priority(run, ask.PriorityClass, values)
	wl := kueue.WorkloadFor(run, ask)
	if err := r.Create(ctx, wl); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return waiting(fmt.Sprintf("the run's Workload cannot be made: %v", err)), nil
		}
		return quota.Verdict{}, fmt.Errorf("making the run's Workload: %w", err)
	}
	run.Status.Kueue = &v1alpha1.KueueAdmission{Workload: wl.Name, Queue: queue, PriorityClassName: ask.PriorityClass, Priority: ask.Priority}
	log.FromContext(ctx).V(2).Info("Made the run's Workload", "agentRun", klog.KObj(run), "workload", wl.Name)
	return waiting("waiting in LocalQueue " + queue), nil
}

// classValues are the values of the WorkloadPriorityClasses named, read from the API server
// (they are few, and read once per run); missing names one that does not exist.
func (r *Reconciler) classValues(ctx context.Context, names []string) (map[string]int32, string) {
	values := make(map[string]int32, len(names))
	for _, name := range names {
		c := &kueuev1beta2.WorkloadPriorityClass{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
			return nil, name
		}
		values[name] = c.Value
	}
	return values, ""
}

// errQueueInvalid is a queue label no LocalQueue can have: the run ends ConfigInvalid.
type errQueueInvalid struct{ error }

// evicted says whether Kueue took back the admission of a run it admitted, and why. A run that
// remembers no admission (status.kueue) was not admitted by Kueue, unless it started before runs
// remembered theirs: then its label says. A run whose Workload is not there has no admission to
// take back.
func (r *Reconciler) evicted(ctx context.Context, run *v1alpha1.AgentRun) (string, bool, error) {
	if !r.Kueue || !kueueAdmitted(run) {
		return "", false, nil
	}
	wl, err := r.workload(ctx, run)
	if err != nil || wl == nil {
		return "", false, err
	}
	_, evicted, why := kueue.Admission(wl)
	return why, evicted, nil
}

// kueueAdmitted reports whether Kueue admitted the run, by what its status remembers, or, for a
// run started before runs remembered it, by its label.
func kueueAdmitted(run *v1alpha1.AgentRun) bool {
	if k := run.Status.Kueue; k != nil {
		return k.Admitted
	}
	_, labelled := kueue.QueueName(run)
	return labelled && run.Status.Phase.Started()
}

// finishWorkload marks the Workload of a run that ended Finished, so that Kueue gives its quota
// to the next Workload: once, with the run's end as the reason. The cache's copy is tried first;
// after a conflict, the API server's.
func (r *Reconciler) finishWorkload(ctx context.Context, run *v1alpha1.AgentRun, now time.Time) error {
	if !r.Kueue || (run.Status.Kueue == nil && !kueueAdmitted(run)) {
		return nil
	}
	why := fmt.Sprintf("%s: %s", run.Status.TerminationReason, run.Status.TerminationMessage)
	var from client.Reader = r.Client
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wl, err := r.workloadIn(ctx, from, run)
		from = r.APIReader
		if err != nil || wl == nil || !kueue.Finished(wl, string(run.Status.Phase), why, now) {
			return err
		}
		return client.IgnoreNotFound(r.Status().Update(ctx, wl))
	})
}

// workload is the run's Workload from the cache, nil if there is none. Its name is the run's
// UID's as well as its name's, so another run of the same name never finds it.
func (r *Reconciler) workload(ctx context.Context, run *v1alpha1.AgentRun) (*kueuev1beta2.Workload, error) {
	return r.workloadIn(ctx, r.Client, run)
}

func (r *Reconciler) workloadIn(ctx context.Context, from client.Reader, run *v1alpha1.AgentRun) (*kueuev1beta2.Workload, error) {
	wl := &kueuev1beta2.Workload{}
	err := from.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: kueue.WorkloadName(run)}, wl)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return wl, nil
}

// workloadDecided passes the updates of a Workload that change what Kueue decided for its run.
func workloadDecided(e event.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*kueuev1beta2.Workload)
	cur, ok2 := e.ObjectNew.(*kueuev1beta2.Workload)
	if !ok1 || !ok2 {
		return true
	}
	a1, e1, m1 := kueue.Admission(old)
	a2, e2, m2 := kueue.Admission(cur)
	return a1 != a2 || e1 != e2 || m1 != m2
}
