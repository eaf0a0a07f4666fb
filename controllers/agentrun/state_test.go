package agentrun

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// TestAHeldStatusIsResumedOnTheStatusItWasDecidedOn checks when a run's held status is what a
// reconcile works on: however many steps are held on the status the API server holds, while the
// run's metadata changes, until a write; a start alone is due after startGrace and held steps
// after the batch period; a status that changed under it drops it.
func TestAHeldStatusIsResumedOnTheStatusItWasDecidedOn(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	table := newRunTable()
	const batch = time.Second
	load := func() *working { return &working{AgentRun: run.DeepCopy(), stored: run.Status} }

	w := load()
	table.hold(w, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}, t0)
	if due, held := heldDue(table, run, batch); !held || !due.Equal(t0.Add(startGrace)) {
		t.Fatalf("a held start is due at %v (held %t), want %v", due, held, t0.Add(startGrace))
	}
	// Two steps applied on top of the held start, as reconciles do: resume, then hold.
	for step := int32(1); step <= 2; step++ {
		w := load()
		st, held := table.heldStatus(w)
		if !held || st.StepCount != step-1 {
			t.Fatalf("step %d: resumed step %d (held %t)", step, st.StepCount, held)
		}
		table.hold(w, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: step}, t0.Add(time.Duration(step)*100*time.Millisecond))
	}
	if due, _ := heldDue(table, run, batch); !due.Equal(t0.Add(batch)) {
		t.Fatalf("held steps are due at %v, want the batch period after the first held change, %v", due, t0.Add(batch))
	}
	run.ResourceVersion = "11" // an annotation changed; status did not
	if st, held := table.heldStatus(load()); !held || st.StepCount != 2 {
		t.Fatalf("after a metadata change resumed step %d (held %t), want 2", st.StepCount, held)
	}
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 1, StartTime: &metav1.MicroTime{Time: t0}}
	if _, held := table.heldStatus(load()); held {
		t.Fatal("a held status was resumed on a status that changed under it")
	}
	if _, held := heldDue(table, run, batch); held {
		t.Fatal("a held status decided on another status was kept")
	}
	table.hold(load(), v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 2}, t0)
	run.ResourceVersion = "12"
	table.wrote(run, "", nil)
	if _, held := heldDue(table, run, batch); held {
		t.Fatal("a written status is still held")
	}
}

// TestWriteIsPutOffOncePerHeldStatus checks that a held status that is due may be written after
// other runs' steps have started only once: a run whose steps keep ending at once is still
// written, and the next held status may be put off again.
func TestWriteIsPutOffOncePerHeldStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	w := &working{AgentRun: run}
	table := newRunTable()
	// putOff is what a reconcile does with a write that is due: put it off, if it may.
	putOff := func() bool {
		h := table.heldWrite(run, time.Second)
		if h.Due.IsZero() || h.Deferred {
			return false
		}
		table.deferWrite(run)
		return true
	}
	if putOff() {
		t.Fatal("a write was put off with nothing held")
	}
	table.hold(w, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 1}, t0)
	if !putOff() {
		t.Fatal("the first held status's write could not be put off")
	}
	table.hold(w, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 2}, t0.Add(time.Millisecond))
	if putOff() {
		t.Fatal("a held status's write was put off twice")
	}
	run.ResourceVersion = "11"
	table.wrote(run, "", nil)
	table.hold(w, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 3}, t0.Add(2*time.Second))
	if !putOff() {
		t.Fatal("the write of a status held after a write could not be put off")
	}
}

// TestTheWholePartsAreThoseOfTheStatusWritten checks that the whole input and history a write
// leaves are what the next load puts back, only into the status they were written with.
func TestTheWholePartsAreThoseOfTheStatusWritten(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	var whole []v1alpha1.HandoffRecord
	for step := int32(1); step <= 30; step++ {
		whole = append(whole, v1alpha1.HandoffRecord{Step: step, InputDigest: "d", Time: metav1.NewTime(t0.Add(time.Duration(step) * time.Second))})
	}
	st := v1alpha1.AgentRunStatus{Input: strings.Repeat("x", 2000), HandoffSequence: whole}
	wholeInput := st.Input
	workflow.StoreStatus(&st)
	run.Status = st
	table := newRunTable()
	table.wrote(run, wholeInput, whole)

	input, inputOK, history, historyOK := table.wholeParts(run, &run.Status)
	if !inputOK || input != wholeInput || !historyOK || len(history) != 30 {
		t.Fatalf("input %t (%d), history %t (%d): want the whole ones written", inputOK, len(input), historyOK, len(history))
	}
	other := run.Status.DeepCopy()
	other.InputDigest, other.HandoffSequence = "another", other.HandoffSequence[1:]
	if _, inputOK, _, historyOK := table.wholeParts(run, other); inputOK || historyOK {
		t.Fatal("whole parts were put into a status they were not written with")
	}
}

// TestLatestIsNeverOlderThanTheLastWrite checks that a reconcile acts on the run as this
// operator's last write left it while the cache is older, and on the cache's copy once it has
// caught up.
func TestLatestIsNeverOlderThanTheLastWrite(t *testing.T) {
	table := newRunTable()
	cached := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	if got := table.latest(cached); got != cached {
		t.Fatal("with no write, the cache's copy was not taken")
	}
	written := cached.DeepCopy()
	written.ResourceVersion, written.Status.StepCount = "12", 3
	written.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "baton"}}
	table.wrote(written, "", nil)

	got := table.latest(cached)
	if got.ResourceVersion != "12" || got.Status.StepCount != 3 || got.ManagedFields != nil {
		t.Fatalf("behind the write, took %s step %d, want the written copy (rv 12, step 3, no managed fields)", got.ResourceVersion, got.Status.StepCount)
	}
	got.Status.StepCount = 99
	if again := table.latest(cached); again.Status.StepCount != 3 {
		t.Fatal("a reconcile's change to the written copy reached the table")
	}

	caughtUp := cached.DeepCopy()
	caughtUp.ResourceVersion = "13"
	if got := table.latest(caughtUp); got != caughtUp {
		t.Fatal("the cache caught up, but its copy was not taken")
	}
	if got := table.latest(cached); got != cached {
		t.Fatal("the written copy was kept after the cache caught up")
	}
}

// A status held lazily is resumed like any held status but is never due by itself: it goes with
// the run's next write. A change held after it is due from its own time, carrying it.
func TestALazyHoldWaitsForTheNextWrite(t *testing.T) {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	table := newRunTable()
	w := &working{AgentRun: run, stored: run.Status}
	uids := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, Branches: []v1alpha1.BranchStatus{{Name: "r-b1-1", UID: "b1"}}}
	table.holdLazily(w, uids)
	if _, due := heldDue(table, run, time.Second); due {
		t.Fatal("a lazy hold is due by itself")
	}
	if st, held := table.heldStatus(w); !held || st.Branches[0].UID != "b1" {
		t.Fatalf("a lazy hold is not resumed: %+v (held %t)", st, held)
	}
	t1 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	uids.Branches[0].Phase = v1alpha1.PhaseAwaitingApproval
	table.hold(w, uids, t1)
	if due, held := heldDue(table, run, time.Second); !held || !due.Equal(t1.Add(startGrace)) {
		t.Fatalf("a change held after a lazy hold is due at %v (held %t); want %v", due, held, t1.Add(startGrace))
	}
}

// heldDue is when the run's held status is due, if one is held and due by itself.
func heldDue(table *runTable, run *v1alpha1.AgentRun, batch time.Duration) (time.Time, bool) {
	h := table.heldWrite(run, batch)
	return h.Due, !h.Due.IsZero()
}
