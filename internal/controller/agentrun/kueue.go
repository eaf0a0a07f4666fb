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

// A run labelled with a Kueue LocalQueue (kueue.QueueLabel) is admitted by Kueue as well as by
// its namespace's AgentQuotas: once the quotas leave it room, the reconciler makes the run's
// Workload (internal/kueue says what it holds and what Kueue's conditions on it mean) and keeps
// the run Queued until Kueue admits it. The Workload is controlled by the run, and the
// reconciler watches it, so that Kueue's admission and eviction bring the run back at once. A
// started run whose Workload is evicted stops; a run that ends, however it ends, finishes its
// Workload, which gives its quota back to Kueue.

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;update;patch

// kueueAdmit decides whether Kueue admits a run the quotas let start: a run with no queue label
// is not Kueue's; a labelled one waits for its Workload, made here the first time, to be
// admitted. A label that no LocalQueue can have is an error the run ends for.
func (r *Reconciler) kueueAdmit(ctx context.Context, run *v1alpha1.AgentRun) (quota.Verdict, error) {
	queue, labelled := kueue.QueueName(run)
	if !labelled {
		return quota.Verdict{Admit: true}, nil
	}
	if err := kueue.CheckQueueName(queue); err != nil {
		return quota.Verdict{}, errQueueInvalid{err}
	}
	waiting := func(why string) quota.Verdict {
		return quota.Verdict{Reason: v1alpha1.ReasonAwaitingAdmission, Message: "Kueue: " + why}
	}
	if !r.Kueue {
		return waiting(fmt.Sprintf("the run is labelled for LocalQueue %s, and this cluster serves no Kueue Workloads "+
			"(kueue.x-k8s.io/v1beta2) to admit it: install Kueue, then restart the operator", queue)), nil
	}
	wl, err := r.workload(ctx, run)
	if err != nil {
		return quota.Verdict{}, err
	}
	if wl == nil {
		wl = kueue.WorkloadFor(run)
		if err := r.Create(ctx, wl); err != nil && !apierrors.IsAlreadyExists(err) {
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				return waiting(fmt.Sprintf("the run's Workload cannot be made: %v", err)), nil
			}
			return quota.Verdict{}, fmt.Errorf("making the run's Workload: %w", err)
		}
		log.FromContext(ctx).V(2).Info("Made the run's Workload", "agentRun", klog.KObj(run), "workload", wl.Name)
		return waiting("waiting in LocalQueue " + queue), nil
	}
	admitted, _, why := kueue.Admission(wl)
	if admitted {
		return quota.Verdict{Admit: true}, nil
	}
	return waiting(why), nil
}

// errQueueInvalid is a queue label no LocalQueue can have: the run ends ConfigInvalid.
type errQueueInvalid struct{ error }

// evicted says whether Kueue took back the admission of a run it admitted, and why. A run whose
// Workload is not there was not admitted by Kueue (the label came after its start), or its
// Workload is gone; either way there is no admission to take back.
func (r *Reconciler) evicted(ctx context.Context, run *v1alpha1.AgentRun) (string, bool, error) {
	if _, labelled := kueue.QueueName(run); !labelled || !r.Kueue {
		return "", false, nil
	}
	wl, err := r.workload(ctx, run)
	if err != nil || wl == nil {
		return "", false, err
	}
	_, evicted, why := kueue.Admission(wl)
	return why, evicted, nil
}

// finishWorkload marks the Workload of a run that ended Finished, so that Kueue gives its quota
// to the next Workload: once, with the run's end as the reason. The cache's copy is tried first;
// after a conflict, the API server's.
func (r *Reconciler) finishWorkload(ctx context.Context, run *v1alpha1.AgentRun, now time.Time) error {
	if _, labelled := kueue.QueueName(run); !labelled || !r.Kueue {
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
