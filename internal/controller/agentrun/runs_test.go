package agentrun

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TestHeldStatusKeepsTheServersBase checks what a run's held status is written against and when:
// the status the API server holds stays the base however many steps are held on top of it, a
// start alone is due after startGrace and held steps after the batch period, a change of the
// run's metadata keeps what is held, and a status that changed under it drops it.
func TestHeldStatusKeepsTheServersBase(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	table := newRunTable()
	const batch = time.Second

	started := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}
	table.hold(run, started, t0)
	if due, held := table.heldDue(run, batch); !held || !due.Equal(t0.Add(startGrace)) {
		t.Fatalf("a held start is due at %v (held %t), want %v", due, held, t0.Add(startGrace))
	}

	// Two steps applied on top of the held start, as a reconcile does: resume, then hold.
	for step := int32(1); step <= 2; step++ {
		if !table.resume(run) || run.Status.StepCount != step-1 {
			t.Fatalf("step %d: resumed step %d", step, run.Status.StepCount)
		}
		table.hold(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: step}, t0.Add(time.Duration(step)*100*time.Millisecond))
		run.Status = v1alpha1.AgentRunStatus{} // what the cache still has
	}
	base, held := table.base(run)
	if !held || base.Phase != "" || base.StepCount != 0 {
		t.Fatalf("base %+v (held %t): want the status the API server holds, Pending", base, held)
	}
	if due, _ := table.heldDue(run, batch); !due.Equal(t0.Add(batch)) {
		t.Fatalf("held steps are due at %v, want the batch period after the first held change, %v", due, t0.Add(batch))
	}

	run.ResourceVersion = "11" // an annotation changed; status did not
	if !table.resume(run) || run.Status.StepCount != 2 {
		t.Fatalf("after a metadata change resumed step %d, want 2", run.Status.StepCount)
	}

	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 1, StartTime: &metav1.MicroTime{Time: t0}}
	if table.resume(run) {
		t.Fatal("a held status was resumed on a status that changed under it")
	}
	if _, held := table.heldDue(run, batch); held {
		t.Fatal("a held status decided on another status was kept")
	}

	table.hold(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 2}, t0)
	run.ResourceVersion = "12"
	table.wrote(run)
	if _, held := table.heldDue(run, batch); held {
		t.Fatal("a written status is still held")
	}
}

// TestWriteIsPutOffOncePerHeldStatus checks that a held status that is due may be written after
// other runs' steps have started only once: a run whose steps keep ending at once is still
// written, and the next held status may be put off again.
func TestWriteIsPutOffOncePerHeldStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "u1", ResourceVersion: "10"}}
	table := newRunTable()
	if table.deferWrite(run) {
		t.Fatal("a write was put off with nothing held")
	}
	table.hold(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 1}, t0)
	if !table.deferWrite(run) {
		t.Fatal("the first held status's write could not be put off")
	}
	table.resume(run)
	table.hold(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 2}, t0.Add(time.Millisecond))
	if table.deferWrite(run) {
		t.Fatal("a held status's write was put off twice")
	}
	run.ResourceVersion = "11"
	table.wrote(run)
	table.hold(run, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StepCount: 3}, t0.Add(2*time.Second))
	if !table.deferWrite(run) {
		t.Fatal("the write of a status held after a write could not be put off")
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
	table.wrote(written)

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
