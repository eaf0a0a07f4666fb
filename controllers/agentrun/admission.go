package agentrun

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run starts only when its namespace's AgentQuotas leave room (internal/quota decides). The
// decision reads the namespace's runs from the cache; a run this operator let start is counted
// from then on even before its status says so (a start is written with the first step), so
// that two runs admitted at once never share one place. A run held waits Queued and comes back
// by itself, sooner the nearer it is to the head of the line, and at once when a run of its
// namespace ends.

// admissions is what this operator admitted and wrote of its namespaces' lines.
type admissions struct {
	mu sync.Mutex
	// admitted are the runs let start whose status may not say so yet, by namespace and name.
	admitted map[string]map[string]struct{}
	// written is when each Queued run's place was last written.
	written map[types.NamespacedName]time.Time
}

func newAdmissions() *admissions {
	return &admissions{admitted: map[string]map[string]struct{}{}, written: map[types.NamespacedName]time.Time{}}
}

func (a *admissions) forget(key types.NamespacedName) {
	a.mu.Lock()
	delete(a.admitted[key.Namespace], key.Name)
	if len(a.admitted[key.Namespace]) == 0 {
		delete(a.admitted, key.Namespace)
	}
	delete(a.written, key)
	a.mu.Unlock()
}

// lastWritten is when the Queued run's place was last written; zero if never.
func (a *admissions) lastWritten(key types.NamespacedName) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.written[key]
}

// wrote notes that the Queued run's place was written at.
func (a *admissions) wrote(key types.NamespacedName, at time.Time) {
	a.mu.Lock()
	a.written[key] = at
	a.mu.Unlock()
}

// release takes back the admission of a run that its quotas let start and Kueue holds: it
// counts as waiting again, not running.
func (a *admissions) release(key types.NamespacedName) {
	a.mu.Lock()
	delete(a.admitted[key.Namespace], key.Name)
	if len(a.admitted[key.Namespace]) == 0 {
		delete(a.admitted, key.Namespace)
	}
	a.mu.Unlock()
}

// admitAction asks the namespace's quotas, then Kueue, whether the run may start (a run let
// start is counted from now on), and decides again with their word. Every way a run starts but a
// branch's goes through it.
func (r *Reconciler) admitAction(ctx context.Context, w *working, f *workflow.Facts, _ workflow.Action) (ctrl.Result, bool, error) {
	v, err := r.admitted(ctx, w.AgentRun, f.Now)
	a := &workflow.Admission{Admit: v.Admit, Reason: v.Reason, Message: v.Message, Place: v.Place}
	var invalid errQueueInvalid
	switch {
	case errors.As(err, &invalid):
		a.Invalid = invalid.Error()
	case err != nil:
		return ctrl.Result{}, false, err
	}
	a.KueueChanged = !equality.Semantic.DeepEqual(w.Status.Kueue, w.stored.Kueue)
	a.Written = r.admissions.lastWritten(client.ObjectKeyFromObject(w.AgentRun))
	f.Start.Admission = a
	return ctrl.Result{}, true, nil
}

// writeQueued writes a Queued run's place in its quotas' line, notes when, and comes back as
// the action says.
func (r *Reconciler) writeQueued(ctx context.Context, w *working, f *workflow.Facts, a workflow.Action) (ctrl.Result, bool, error) {
	r.admissions.wrote(client.ObjectKeyFromObject(w.AgentRun), f.Now)
	_, err := r.write(ctx, w, nil, a.Update)
	return ctrl.Result{RequeueAfter: a.After}, false, err
}

// admitted decides whether the run may start: its namespace's quotas first, then, for a run
// labelled with a LocalQueue, Kueue (kueue.go). A run Kueue holds gives its place back.
func (r *Reconciler) admitted(ctx context.Context, run *v1alpha1.AgentRun, now time.Time) (quota.Verdict, error) {
	v, err := r.admit(ctx, run, now)
	if err != nil || !v.Admit {
		return v, err
	}
	v, err = r.kueueAdmit(ctx, run)
	if err != nil || !v.Admit {
		r.admissions.release(client.ObjectKeyFromObject(run))
	}
	return v, err
}

// admit decides whether the run may start under its namespace's quotas. A run let start is
// counted as running from now on.
func (r *Reconciler) admit(ctx context.Context, run *v1alpha1.AgentRun, now time.Time) (quota.Verdict, error) {
	quotas := &v1alpha1.AgentQuotaList{}
	if err := r.List(ctx, quotas, client.InNamespace(run.Namespace)); err != nil {
		return quota.Verdict{}, err
	}
	if len(quotas.Items) == 0 {
		return quota.Verdict{Admit: true}, nil
	}
	a := r.admissions
	a.mu.Lock()
	defer a.mu.Unlock()
	key := client.ObjectKeyFromObject(run)
	inNamespace := a.admitted[run.Namespace]
	if _, ok := inNamespace[run.Name]; ok {
		return quota.Verdict{Admit: true}, nil
	}
	admitted := func(name string) bool {
		_, ok := inNamespace[name]
		return ok
	}
	use, runs, line, err := r.usage().Of(ctx, run.Namespace, quotas.Items, admitted, false, now)
	if err != nil {
		return quota.Verdict{}, err
	}
	line = slices.DeleteFunc(line, func(w quota.Waiting) bool { return admitted(w.Name) }) // at work, as far as quotas go
	if len(inNamespace) > 0 {
		seen := make(map[string]bool, len(runs))
		for i := range runs {
			seen[runs[i].Name] = true
		}
		for name := range inNamespace {
			if !seen[name] {
				use.Running++ // admitted, and in no list yet
			}
		}
	}
	v := quota.Decide(quotas.Items, use, line, quota.WaitingOf(run), now)
	if v.Admit {
		if inNamespace == nil {
			inNamespace = map[string]struct{}{}
			a.admitted[run.Namespace] = inNamespace
		}
		inNamespace[run.Name] = struct{}{}
		delete(a.written, key)
	}
	return v, nil
}

// queuedBehind maps a run that ended to the head of its namespace's line, which may start now.
func (r *Reconciler) queuedBehind(ctx context.Context, o client.Object) []reconcile.Request {
	run, ok := o.(*v1alpha1.AgentRun)
	if !ok {
		return nil
	}
	line, err := agentquota.Line(ctx, r.Client, run.Namespace)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, w := range line[:min(len(line), headOfLine)] {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: run.Namespace, Name: w.Name}})
	}
	return reqs
}

// headOfLine is how many runs at the head of a line a run's end wakes.
const headOfLine = 4

// endedPredicate passes the updates that end a run, and deletions: a place in its namespace's
// line may be free.
func endedPredicate() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*v1alpha1.AgentRun)
			cur, ok2 := e.ObjectNew.(*v1alpha1.AgentRun)
			return ok1 && ok2 && !old.Status.Phase.Terminal() && cur.Status.Phase.Terminal()
		},
	}
}

// usage reads what a namespace uses against its quotas.
func (r *Reconciler) usage() *agentquota.Usage {
	return &agentquota.Usage{Reader: r.Client, Ledger: r.Ledger, Bytes: r.Transcript}
}
