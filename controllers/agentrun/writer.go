package agentrun

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// A status decided in a reconcile is written off the reconcile's worker (docs/design/
// reconcile-tail.md): the reconcile records what must be durable first (the transcript, as
// before), hands the status to the status writer (handOff) and goes on deciding as if it were
// written, as it does with a held status. The writer patches it, emits its Events once it is
// written, and wakes the run if a reconcile of it waits for the write (else the write's watch
// event brings it back). A run has one write in flight at a time; what its reconciles
// decide meanwhile is handed off too and written next, in one patch. So a reconcile takes the
// time of a decision, and workers serve the runs whose steps ended while the API server works.
//
// What must see the status written waits for the writer to wake the run: a run's end (its
// branches are cancelled and what is kept of it forgotten), a fan-out's branch runs (made only
// once the status that names them is written, so that a restart never makes a branch twice),
// and every write still made in the reconcile (a start, a join, a queued run's place).
//
// A write refused because the run changed (a conflict) goes back to the run: its next
// reconcile decides again on the fresh copy, with the refused status as its own (the status
// decided is this operator's alone), and the writer tries again on that copy; unless the fresh
// copy's status is not what the refused write was computed against (dropStale).

// errorRetry is how soon a run whose status write failed for another reason than a conflict is
// tried again; each failure in a row doubles it, up to maxErrorRetry.
const (
	errorRetry    = time.Second
	maxErrorRetry = time.Minute
)

// retryAfter is how soon a write that failed n times in a row, not for a conflict, is tried again.
func retryAfter(n int) time.Duration {
	if n <= 1 {
		return errorRetry
	}
	return min(errorRetry<<min(n-1, 6), maxErrorRetry)
}

// outWrite is a run's status decided and handed to the status writer.
type outWrite struct {
	// run is the copy of the run the newest decision was made on (its resourceVersion is the
	// write's lock), with the status to write, cut to what the API server keeps.
	run *v1alpha1.AgentRun
	// base is what the API server holds of the status: what the patch is computed against.
	base v1alpha1.AgentRunStatus
	// whole is the status to write, whole, and input and history what it holds only the
	// beginning of.
	whole   v1alpha1.AgentRunStatus
	input   string
	history []v1alpha1.HandoffRecord
	// events explain the write, in order; guard is the guard that ended the run, if one did.
	events []workflow.Event
	guard  string
	// refused is set when the write was refused for a conflict: it waits for the run's next
	// reconcile to decide on a fresh copy (rearm).
	refused bool
}

// handOff gives the writer the run's status, decided whole and cut to stored: what is held
// goes with it, and a status handed off before and not yet taken is replaced, its Events kept.
// The run's next loads start from it.
func (t *runTable) handOff(w *working, stored, whole v1alpha1.AgentRunStatus, input string, history []v1alpha1.HandoffRecord, d workflow.Update) {
	// The write's own copy: the metadata it is locked to, the spec shared (nothing changes a
	// run's spec in place, and writeOut patches a copy), the status to write.
	run := &v1alpha1.AgentRun{TypeMeta: w.TypeMeta, ObjectMeta: *w.ObjectMeta.DeepCopy(), Spec: w.Spec, Status: stored}
	run.ManagedFields = nil
	t.with(w.AgentRun, func(s *runState) {
		s.held = nil
		if s.written != nil && newer(s.written.ResourceVersion, run.ResourceVersion) {
			// Decided while this operator's last write was in flight, on the status it wrote:
			// nobody else changed the run between the two, or that write would have been refused.
			run.ResourceVersion = s.written.ResourceVersion
		}
		if s.out == nil {
			s.out = &outWrite{base: w.stored}
		}
		o := s.out
		o.run, o.whole, o.input, o.history, o.refused = run, whole, input, history, false
		o.events = append(o.events, d.Events...)
		if d.Guard != "" {
			o.guard = d.Guard
		}
	})
}

// newest is the newest status of the run handed to the writer and not yet written: the one to
// be written next, else the one in flight; nil if there is none.
func (s *runState) newest() *outWrite {
	if s.out != nil {
		return s.out
	}
	return s.flight
}

// newer reports whether resourceVersion a is newer than b.
func newer(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp > 0
}

// outgoing is the newest status handed to the writer for the run and not yet written, cut
// and whole, if there is one.
func (t *runTable) outgoing(run *v1alpha1.AgentRun) (stored, whole v1alpha1.AgentRunStatus, ok bool) {
	t.of(run, func(s *runState) {
		if o := s.newest(); o != nil {
			stored, whole, ok = o.run.Status, *o.whole.DeepCopy(), true
		}
	})
	return stored, whole, ok
}

// asHeld is the run with the status this process decided for it and has handed to the writer,
// or wrote and the cache does not show yet, if there is one; else the run as given. The run
// given is not changed.
func (t *runTable) asHeld(run *v1alpha1.AgentRun) *v1alpha1.AgentRun {
	var held *v1alpha1.AgentRun
	t.of(run, func(s *runState) {
		o := s.newest()
		switch {
		case o != nil:
			held = &v1alpha1.AgentRun{TypeMeta: run.TypeMeta, ObjectMeta: run.ObjectMeta, Spec: run.Spec, Status: o.run.Status}
		case s.written != nil && newer(s.written.ResourceVersion, run.ResourceVersion):
			held = &v1alpha1.AgentRun{TypeMeta: run.TypeMeta, ObjectMeta: run.ObjectMeta, Spec: run.Spec, Status: s.written.Status}
		}
	})
	if held == nil {
		return run
	}
	return held
}

// awaitWrite reports whether a status of the run is handed to the writer and not yet written;
// if one is, the writer wakes the run once all of it is written.
func (t *runTable) awaitWrite(run *v1alpha1.AgentRun) bool {
	var pending bool
	t.of(run, func(s *runState) {
		pending = s.out != nil || s.flight != nil
		s.await = s.await || pending
	})
	return pending
}

// existing runs f on the run's state, if there is one.
func (t *runTable) existing(key types.NamespacedName, f func(*runState)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.runs[key]; ok {
		f(s)
	}
}

// of runs f on what is kept of the run, if anything is: not of another run that had its name.
func (t *runTable) of(run *v1alpha1.AgentRun, f func(*runState)) {
	t.existing(client.ObjectKeyFromObject(run), func(s *runState) {
		if s.uid == run.UID {
			f(s)
		}
	})
}

// takeOut is the run's next write, now in flight; nil if there is none to make now.
func (t *runTable) takeOut(key types.NamespacedName) *outWrite {
	var o *outWrite
	t.existing(key, func(s *runState) {
		if s.out != nil && !s.out.refused && s.flight == nil {
			o, s.flight, s.out = s.out, s.out, nil
		}
	})
	return o
}

// wroteOut notes the write in flight done, the run as it returned: the copy the next loads
// take while the cache is older, and the base and lock of the write handed off meanwhile. It
// reports whether the run waits for its writes (awaitWrite), all of them now made.
func (t *runTable) wroteOut(key types.NamespacedName, o *outWrite, written *v1alpha1.AgentRun) (wake bool) {
	written = written.DeepCopy()
	written.ManagedFields = nil
	t.existing(key, func(s *runState) {
		if s.flight != o || s.uid != written.UID {
			return
		}
		s.flight, s.writeFailures = nil, 0
		s.remember(written, o.input, o.history)
		if s.out != nil {
			s.out.base, s.out.run.ResourceVersion = written.Status, written.ResourceVersion
			return
		}
		wake, s.await = s.await, false
	})
	return wake
}

// putBack returns a refused write to the run: the status handed off since goes with it, after
// its Events. It waits for the run's next reconcile (rearm). It reports how many writes of the
// run failed in a row for another reason than a conflict, this one counted if it did.
func (t *runTable) putBack(key types.NamespacedName, o *outWrite, conflict bool) (failures int) {
	t.existing(key, func(s *runState) {
		if s.flight != o {
			return
		}
		if !conflict {
			s.writeFailures++
		}
		failures = s.writeFailures
		s.flight = nil
		if n := s.out; n != nil {
			n.base, n.events = o.base, append(o.events, n.events...)
			if n.guard == "" {
				n.guard = o.guard
			}
			o = n
		}
		o.refused, s.out = true, o
	})
	return failures
}

// dropFlight forgets the write in flight of a run that is gone.
func (t *runTable) dropFlight(key types.NamespacedName, o *outWrite) {
	t.existing(key, func(s *runState) {
		if s.flight == o {
			s.flight = nil
		}
	})
}

// dropStale forgets a refused write of the run, and what is held of it, when the run as the API
// server now holds it is not what the write was computed against: its status changed under it
// (or ended), so the write's decisions are made again from the fresh copy, and the steps they
// applied from their records.
func (t *runTable) dropStale(run *v1alpha1.AgentRun) {
	t.of(run, func(s *runState) {
		o := s.out
		if o == nil || !o.refused || s.flight != nil {
			return
		}
		if run.Status.Phase.Terminal() || !equality.Semantic.DeepEqual(run.Status, o.base) {
			s.out, s.held, s.await = nil, nil, false
		}
	})
}

// rearm gives back to the writer a refused write of the run, on the copy the reconcile just
// decided on; it reports whether there was one.
func (t *runTable) rearm(w *working) bool {
	again := false
	t.of(w.AgentRun, func(s *runState) {
		if o := s.out; o != nil && o.refused && s.flight == nil {
			o.run.ObjectMeta = *w.ObjectMeta.DeepCopy()
			o.run.ManagedFields, o.refused, again = nil, false, true
		}
	})
	return again
}

// statusWriter writes the statuses handed off, a few at once and one at a time per run.
type statusWriter struct {
	queue   workqueue.TypedInterface[types.NamespacedName]
	wake    chan event.GenericEvent
	workers int
	write   func(context.Context, types.NamespacedName)
}

func newStatusWriter(workers int, write func(context.Context, types.NamespacedName)) *statusWriter {
	return &statusWriter{
		queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: "agentrun-status"}),
		wake:  make(chan event.GenericEvent, 1024), workers: max(workers, 1), write: write,
	}
}

// Start writes until ctx ends.
func (sw *statusWriter) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range sw.workers {
		wg.Go(func() {
			for {
				key, shutdown := sw.queue.Get()
				if shutdown {
					return
				}
				sw.write(ctx, key)
				sw.queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	sw.queue.ShutDown()
	wg.Wait()
	return nil
}

// add asks for the run's write.
func (sw *statusWriter) add(run *v1alpha1.AgentRun) {
	sw.queue.Add(client.ObjectKeyFromObject(run))
}

// Woken is where the writer sends the runs whose write ended.
func (sw *statusWriter) Woken() <-chan event.GenericEvent { return sw.wake }

// wakeAfter wakes the run after d.
func (sw *statusWriter) wakeAfter(ctx context.Context, key types.NamespacedName, d time.Duration) {
	obj := &v1alpha1.AgentRun{}
	obj.Name, obj.Namespace = key.Name, key.Namespace
	send := func() {
		select {
		case sw.wake <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
		}
	}
	if d <= 0 {
		send()
		return
	}
	time.AfterFunc(d, send)
}

// writeOut makes the run's next write: one merge patch of its status against what the API
// server holds, locked to the copy the status was decided on; then its Events, and the run is
// woken if a reconcile of it waits for the write.
func (r *Reconciler) writeOut(ctx context.Context, key types.NamespacedName) {
	o := r.runs.takeOut(key)
	if o == nil {
		return
	}
	run := o.run.DeepCopy()
	// The patch's base: read only while the patch is computed, before the answer fills run.
	orig := *run
	orig.Status = o.base
	err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(&orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		r.afterWrite(ctx, run, o.base, o.events, o.guard)
		if r.runs.wroteOut(key, o, run) {
			r.writer.wakeAfter(ctx, key, 0)
		}
	case apierrors.IsNotFound(err):
		r.runs.dropFlight(key, o)
	default:
		conflict := apierrors.IsConflict(err)
		failures := r.runs.putBack(key, o, conflict)
		retry := conflictRetry
		if !conflict {
			retry = retryAfter(failures)
			log.FromContext(ctx).Error(err, "Writing a run's status; trying again", "agentRun", klog.KObj(run), "after", retry)
		}
		r.writer.wakeAfter(ctx, key, retry)
	}
}
