package agentrun

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run as a reconcile works on it, and what the reconciler keeps of it between reconciles.
//
// The API server keeps a run's status small (workflow.StoreStatus): the next agent's input cut
// to its beginning, with a digest of the whole, and the latest handoff records without their
// digests. The workflow core decides on the whole status. So a reconcile loads its run once
// (load.go): the cache's copy, or, while the cache is older than this operator's last write,
// that write's; with its status whole as this operator decided it and holds it, as it handed it
// to the status writer, as it last wrote it, or, the first time this process works on the run,
// as the transcript has it. And it stores the run once (store.go): the status cut to what the
// API server keeps, handed to the status writer (writer.go) for one patch against what the API
// server holds, remembered for the next load. Between the two, the run's status is whole:
// nothing cuts it or puts it together again.
//
// A step whose run goes on is held (hold): the next step starts at once, and what is held is
// written once the batch period since its oldest change has passed, else with the steps that
// end soon after. A gate, an end or an Event is handed to the writer at once, with what is
// held. Every step held is in the transcript already, so an operator that stops before the
// write loses nothing: its successor applies those steps again from their records.
//
// The informer cache may hold the copy of a run from before this operator's last write; a
// reconcile that acted on it would see a step not yet applied and start it a second time. So
// while the cache is older than the last write, reconciles take the written copy (newer in
// every field), and drop it once the cache has caught up: a run never waits for its own write's
// watch event.

// working is a run as a reconcile works on it.
type working struct {
	*v1alpha1.AgentRun
	// stored is the run's status as the API server holds it: what the next write is computed
	// against. The run's own Status is whole.
	stored v1alpha1.AgentRunStatus
	// begun is set when a start is held to be written with the run's first step (begin).
	begun bool
	// turn is what a turn of a session starts from, once gathered (session.go).
	turn *turn
	// start is what a Pending run's start gathered and would pin (start.go).
	start *starting
	// ahead is set when the run is this operator's last written copy: the cache is older.
	ahead bool
}

// runTable holds what the reconciler keeps of every run it works on, and forget drops all of a
// run's at once when it ends or is deleted.
type runTable struct {
	mu   sync.Mutex
	runs map[types.NamespacedName]*runState
}

// runState is what the reconciler keeps of one run between reconciles.
type runState struct {
	uid types.UID
	// written is the run as this operator's last status write returned it, until the cache
	// has caught up with that write.
	written *v1alpha1.AgentRun
	// revision and plan are the run's checked plan and the pinned config it was built from:
	// neither changes while the run runs, so the plan (output schemas compiled) is built once.
	revision string
	plan     *workflow.Plan
	// input and history are what the status last written holds only the beginning of: the
	// whole input of the status whose inputDigest is inputDigest, and the whole handoff history.
	inputDigest, input string
	history            []v1alpha1.HandoffRecord
	// held is the run's status decided and not yet written.
	held *heldStatus
	// out is the run's status handed to the status writer, to be written next, and flight
	// the one the writer writes now (writer.go).
	out, flight *outWrite
	// await is set while a reconcile of the run waits for what was handed off to be written.
	await bool
	// creating is set while the run's branch runs are being made (makeBranchesOff).
	creating bool
	// writeFailures counts the run's status writes that failed in a row, not for a conflict.
	writeFailures int
	// released is when the run, held at its namespace's cap, found room for its step.
	released time.Time
	// made are the UIDs of the branch runs this process made for the run, by name: the runs
	// of its branches until its status lists their UIDs, should the write that lists them
	// not be made (branchruns.go).
	made map[string]madeRun
}

// madeRun is a branch run this process made: its UID, when, and whether the cache has shown it
// since.
type madeRun struct {
	uid  types.UID
	at   time.Time
	seen bool
}

// heldStatus is a run's status decided and not yet written: its start, waiting to be written
// with its first step's result, and steps that ended within a short time of each other, written
// together.
type heldStatus struct {
	// on is the status the API server held when it was decided: only this operator writes a
	// run's status, so it stays the base of the write while the run's metadata changes.
	on statusAt
	// status is the decided status, whole.
	status v1alpha1.AgentRunStatus
	// at is when the first change of status was decided that is not yet written.
	at time.Time
	// deferred is set once the write, due, was put off for other runs' steps to start first.
	deferred bool
	// lazy is set while nothing held needs a write of its own: it goes with the run's next
	// write, whenever that is (holdLazily).
	lazy bool
}

// statusAt says which of a run's statuses a status is.
type statusAt struct {
	phase    v1alpha1.RunPhase
	steps    int32
	decision int64
}

func at(s *v1alpha1.AgentRunStatus) statusAt {
	return statusAt{phase: s.Phase, steps: s.StepCount, decision: s.LastDecision}
}

// due is when the held status must be written: a start alone after startGrace, steps after
// the batch period.
func (h *heldStatus) due(batch time.Duration) time.Time {
	if h.status.StepCount == h.on.steps {
		return h.at.Add(startGrace)
	}
	return h.at.Add(batch)
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

// heldPhase is the phase of the status this operator holds for the run and has not written
// yet (a run begun writes its start with its first step's result), held or handed to the
// writer; "" when it holds none.
func (t *runTable) heldPhase(run *v1alpha1.AgentRun) v1alpha1.RunPhase {
	var phase v1alpha1.RunPhase
	t.of(run, func(s *runState) {
		if s.held != nil {
			phase = s.held.status.Phase
		} else if o := s.newest(); o != nil {
			phase = o.whole.Phase
		}
	})
	return phase
}

// forget drops everything kept of the run (a status write in flight finds nothing to note).
func (t *runTable) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, key)
}

// latest is the freshest copy of the run this operator knows: the cache's, or, while the cache
// is older than this operator's last status write, the run as that write returned it. Once the
// cache has caught up, the written copy is dropped.
func (t *runTable) latest(run *v1alpha1.AgentRun) *v1alpha1.AgentRun {
	latest, _ := t.latestOf(run)
	return latest
}

// latestOf is latest, and whether it is this operator's written copy, newer than the cache's.
func (t *runTable) latestOf(run *v1alpha1.AgentRun) (latest *v1alpha1.AgentRun, ahead bool) {
	latest = run
	t.of(run, func(s *runState) {
		switch {
		case s.written == nil:
		case newer(s.written.ResourceVersion, run.ResourceVersion):
			latest, ahead = s.written.DeepCopy(), true
		default:
			s.written = nil
		}
	})
	return latest, ahead
}

// wrote remembers the run as this operator's status write left it, and the whole input and
// history of the status it wrote; nothing is held any more.
func (t *runTable) wrote(run *v1alpha1.AgentRun, input string, history []v1alpha1.HandoffRecord) {
	written := run.DeepCopy()
	written.ManagedFields = nil
	t.with(run, func(s *runState) {
		s.held = nil
		s.remember(written, input, history)
	})
}

// remember keeps the run as this operator's status write returned it, and the whole input and
// history of the status it wrote.
func (s *runState) remember(written *v1alpha1.AgentRun, input string, history []v1alpha1.HandoffRecord) {
	s.written = written
	s.inputDigest, s.input, s.history = written.Status.InputDigest, "", history
	if written.Status.InputDigest != "" {
		s.input = input
	}
}

// keepWhole remembers the whole input and history of the run's status as it is stored, found in
// the transcript, so that the next loads need not look again.
func (t *runTable) keepWhole(run *v1alpha1.AgentRun, input string, history []v1alpha1.HandoffRecord) {
	t.with(run, func(s *runState) {
		s.inputDigest, s.input, s.history = run.Status.InputDigest, input, history
	})
}

// unhold drops what is held of the run: it is what the API server holds already.
func (t *runTable) unhold(run *v1alpha1.AgentRun) {
	t.with(run, func(s *runState) { s.held = nil })
}

// hold keeps the run's whole status, decided at now, to be written later.
func (t *runTable) hold(w *working, status v1alpha1.AgentRunStatus, now time.Time) {
	t.with(w.AgentRun, func(s *runState) {
		if s.held == nil || s.held.lazy {
			s.held = &heldStatus{on: at(&w.stored), at: now}
		}
		s.held.status = status
	})
}

// holdLazily keeps the run's whole status to be written with its next write, not by a write
// of its own: what changed is worth no write (a fan-out's branch UIDs, which a restart finds
// again). A change held already keeps its due time.
func (t *runTable) holdLazily(w *working, status v1alpha1.AgentRunStatus) {
	t.with(w.AgentRun, func(s *runState) {
		if s.held == nil {
			s.held = &heldStatus{on: at(&w.stored), lazy: true}
		}
		s.held.status = status
	})
}

// heldStatus is the run's held status, if one was decided on the status the API server holds
// (one decided on another is dropped).
func (t *runTable) heldStatus(w *working) (v1alpha1.AgentRunStatus, bool) {
	var status v1alpha1.AgentRunStatus
	held := false
	t.with(w.AgentRun, func(s *runState) {
		switch {
		case s.held == nil:
		case s.held.on != at(&w.stored):
			s.held = nil
		default:
			status, held = *s.held.status.DeepCopy(), true
		}
	})
	return status, held
}

// heldWrite is when the run's held status must be written, if one is held and due at all, and
// whether its write was put off once already.
func (t *runTable) heldWrite(run *v1alpha1.AgentRun, batch time.Duration) workflow.HeldWrite {
	var h workflow.HeldWrite
	t.with(run, func(s *runState) {
		if s.held != nil && !s.held.lazy {
			h = workflow.HeldWrite{Due: s.held.due(batch), Deferred: s.held.deferred}
		}
	})
	return h
}

// deferWrite notes that the run's held status, due, is written a little later, after other
// runs' steps have started: once per held status, so that a run whose steps keep ending at once
// is still written about once a batch period.
func (t *runTable) deferWrite(run *v1alpha1.AgentRun) {
	t.with(run, func(s *runState) {
		if s.held != nil {
			s.held.deferred = true
		}
	})
}

// wholeParts is what is remembered of the whole input and history of the status last written,
// when it is the status st is.
func (t *runTable) wholeParts(run *v1alpha1.AgentRun, st *v1alpha1.AgentRunStatus) (input string, inputOK bool, history []v1alpha1.HandoffRecord, historyOK bool) {
	t.with(run, func(s *runState) {
		if st.InputDigest != "" && s.inputDigest == st.InputDigest {
			input, inputOK = s.input, true
		}
		if s.history != nil && workflow.IsStoredHistory(st.HandoffSequence, s.history) {
			history, historyOK = append([]v1alpha1.HandoffRecord(nil), s.history...), true
		}
	})
	return input, inputOK, history, historyOK
}

// madeBranch remembers that this process made the run's branch of that name, as the run of uid.
func (t *runTable) madeBranch(run *v1alpha1.AgentRun, name string, uid types.UID, now time.Time) {
	t.with(run, func(s *runState) {
		if s.made == nil {
			s.made = map[string]madeRun{}
		}
		s.made[name] = madeRun{uid: uid, at: now}
	})
}

// madeUID is the UID of the run this process made for the run's branch of that name, if it did.
func (t *runTable) madeUID(run *v1alpha1.AgentRun, name string) types.UID {
	m, _ := t.madeRun(run, name)
	return m.uid
}

// madeRun is what this process knows of the run it made for the run's branch of that name.
func (t *runTable) madeRun(run *v1alpha1.AgentRun, name string) (m madeRun, ok bool) {
	t.of(run, func(s *runState) { m, ok = s.made[name] })
	return m, ok
}

// startCreating notes that the run's branch runs are being made; false if they are already.
func (t *runTable) startCreating(run *v1alpha1.AgentRun) bool {
	started := false
	t.with(run, func(s *runState) {
		started, s.creating = !s.creating, true
	})
	return started
}

// doneCreating notes that the run's branch runs are made, or failed to be.
func (t *runTable) doneCreating(run *v1alpha1.AgentRun) {
	t.of(run, func(s *runState) { s.creating = false })
}

// creating reports whether the run's branch runs are being made.
func (t *runTable) creating(run *v1alpha1.AgentRun) bool {
	var creating bool
	t.of(run, func(s *runState) { creating = s.creating })
	return creating
}

// seenBranch notes that the cache has shown the branch run of that name this process made.
func (t *runTable) seenBranch(run *v1alpha1.AgentRun, name string) {
	t.with(run, func(s *runState) {
		if m, ok := s.made[name]; ok && !m.seen {
			m.seen = true
			s.made[name] = m
		}
	})
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

// release notes when a run held at its namespace's cap found room for its step.
func (t *runTable) release(run *v1alpha1.AgentRun, now time.Time) {
	t.with(run, func(s *runState) { s.released = now })
}

// peekRelease is when the run found room, if it did since it was held.
func (t *runTable) peekRelease(run *v1alpha1.AgentRun) (time.Time, bool) {
	var at time.Time
	t.with(run, func(s *runState) { at = s.released })
	return at, !at.IsZero()
}

// takeRelease forgets when the run found room: its step got past the call it was held at.
func (t *runTable) takeRelease(run *v1alpha1.AgentRun) {
	t.with(run, func(s *runState) { s.released = time.Time{} })
}
