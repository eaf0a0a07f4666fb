package agentrun

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// What the reconciler keeps of a run between reconciles, beside its step in flight (package
// steps runs that):
//
//  1. Hold. A step whose run goes on is held (heldStatus) and the next step starts at once;
//     then what is held is written if the batch period since its oldest change has passed,
//     else it waits for the steps that end soon after. A gate, an end or an Event is written
//     at once, with what is held.
//  2. Write. One status patch, guarded by the resourceVersion it was computed from, and the run
//     as the API server returned it is kept. The informer cache may still hold the copy from
//     before the write; a reconcile that acted on it would see the step not yet applied and
//     start it a second time. So while the cache is older than the last write, reconciles take
//     the written copy instead (newer than the cache's in every field), and drop it once the
//     cache has caught up: a run never waits for its own write's watch event.
//
// runTable holds that state for every run the operator is working on, in one place, and forget
// drops all of it at once when a run ends or is deleted.
type runTable struct {
	mu   sync.Mutex
	runs map[types.NamespacedName]*runState
}

// runState is what the operator keeps of one run between reconciles.
type runState struct {
	uid types.UID
	// written is the run as this operator's last status write returned it, until the cache
	// has caught up with that write.
	written *v1alpha1.AgentRun
	// revision and plan are the run's checked plan and the pinned config it was built from:
	// neither changes while the run runs, so the plan (output schemas compiled) is built once.
	revision string
	plan     *workflow.Plan
	// held is the run's status as decided and not yet written (see heldStatus).
	held *heldStatus
	// input is the whole input of the run's status (inputs.go).
	input input
	// history is the run's whole handoff sequence as last written (history.go).
	history []v1alpha1.HandoffRecord
}

// heldStatus is a run's status decided and not yet written: its start, waiting to be written
// with its first step's result, and steps that ended within a short time of each other, written
// together. Every step it holds is in the transcript already, so an operator that stops before
// the write loses nothing: its successor applies those steps again from their records.
type heldStatus struct {
	// base is the status the API server holds: what the write is computed against. Only this
	// operator writes a run's status, so it stays the base while the run's metadata changes.
	base v1alpha1.AgentRunStatus
	// status is the decided status, whole (input and history not cut to what status keeps).
	status v1alpha1.AgentRunStatus
	// at is when the first change of status was decided that is not yet written.
	at time.Time
	// deferred is set once the write, due, was put off for other runs' steps to start first.
	deferred bool
}

// due is when the held status must be written: a start alone after startGrace, steps after
// the batch period.
func (h *heldStatus) due(batch time.Duration) time.Time {
	if h.status.StepCount == h.base.StepCount {
		return h.at.Add(startGrace)
	}
	return h.at.Add(batch)
}

// current reports whether the held status was decided on the status the run has now.
func (h *heldStatus) current(run *v1alpha1.AgentRun) bool {
	return h.base.Phase == run.Status.Phase && h.base.StepCount == run.Status.StepCount &&
		h.base.LastDecision == run.Status.LastDecision
}

func newRunTable() *runTable {
	return &runTable{runs: map[types.NamespacedName]*runState{}}
}

// with runs f on the run's state, made for this run's UID if there is none or it was another
// run's of the same name.
func (t *runTable) with(run *v1alpha1.AgentRun, f func(*runState)) {
	key := client.ObjectKeyFromObject(run)
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.runs[key]
	if !ok || s.uid != run.UID {
		s = &runState{uid: run.UID}
		t.runs[key] = s
	}
	f(s)
}

// existing runs f on the run's state only if it is still held for this run: a step's
// goroutine that outlived its run must not bring the run's state back.
func (t *runTable) existing(key types.NamespacedName, uid types.UID, f func(*runState)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.runs[key]
	if !ok || s.uid != uid {
		return false
	}
	f(s)
	return true
}

// wrote remembers the run as this operator's status write left it.
func (t *runTable) wrote(run *v1alpha1.AgentRun) {
	written := run.DeepCopy()
	written.ManagedFields = nil
	t.with(run, func(s *runState) { s.written, s.held = written, nil })
}

// hold keeps status, decided at now, to be written later. When nothing is held yet the run's
// status is what the API server holds; otherwise the run's status is the held one (resumed
// this reconcile), and what the API server holds stays the base.
func (t *runTable) hold(run *v1alpha1.AgentRun, status v1alpha1.AgentRunStatus, now time.Time) {
	t.with(run, func(s *runState) {
		if s.held == nil {
			s.held = &heldStatus{base: *run.Status.DeepCopy(), at: now}
		}
		s.held.status = status
	})
}

// resume puts the run's held status in its status; false when none is held for the status
// the run has (one held for another is dropped).
func (t *runTable) resume(run *v1alpha1.AgentRun) bool {
	held := false
	t.with(run, func(s *runState) {
		switch {
		case s.held == nil:
		case !s.held.current(run):
			s.held = nil
		default:
			run.Status, held = *s.held.status.DeepCopy(), true
		}
	})
	return held
}

// heldDue reports when the run's held status must be written, if one is held.
func (t *runTable) heldDue(run *v1alpha1.AgentRun, batch time.Duration) (time.Time, bool) {
	var due time.Time
	held := false
	t.with(run, func(s *runState) {
		if s.held != nil {
			due, held = s.held.due(batch), true
		}
	})
	return due, held
}

// deferWrite reports whether the run's held status, due, may be written a little later, after
// other runs' steps have started: once per held status, so that a run whose steps keep ending
// at once is still written about once a batch period.
func (t *runTable) deferWrite(run *v1alpha1.AgentRun) bool {
	deferred := false
	t.with(run, func(s *runState) {
		if s.held != nil && !s.held.deferred {
			s.held.deferred, deferred = true, true
		}
	})
	return deferred
}

// base is the status the API server holds for a run whose status is held: what the write is
// computed against.
func (t *runTable) base(run *v1alpha1.AgentRun) (v1alpha1.AgentRunStatus, bool) {
	var base v1alpha1.AgentRunStatus
	held := false
	t.with(run, func(s *runState) {
		if s.held != nil {
			base, held = *s.held.base.DeepCopy(), true
		}
	})
	return base, held
}

// latest is the freshest copy of the run this operator knows: the cache's, or, while the cache
// is older than this operator's last status write, the run as that write returned it. Once the
// cache has caught up, the written copy is dropped.
func (t *runTable) latest(run *v1alpha1.AgentRun) *v1alpha1.AgentRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.runs[client.ObjectKeyFromObject(run)]
	if !ok || s.uid != run.UID || s.written == nil {
		return run
	}
	cmp, err := resourceversion.CompareResourceVersion(run.ResourceVersion, s.written.ResourceVersion)
	if err == nil && cmp < 0 {
		return s.written.DeepCopy()
	}
	s.written = nil
	return run
}

// plan is the run's cached plan for its pinned revision, if built.
func (t *runTable) plan(run *v1alpha1.AgentRun) *workflow.Plan {
	var p *workflow.Plan
	t.with(run, func(s *runState) {
		if s.revision == run.Status.ConfigRevision {
			p = s.plan
		}
	})
	return p
}

func (t *runTable) setPlan(run *v1alpha1.AgentRun, p *workflow.Plan) {
	t.with(run, func(s *runState) { s.revision, s.plan = run.Status.ConfigRevision, p })
}

// forget drops everything held for the run.
func (t *runTable) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, key)
}
