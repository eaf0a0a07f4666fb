package stored_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/replay/stored"
)

// noBranches is the lister of a run that made none.
func noBranches(context.Context, *v1alpha1.AgentRun) ([]v1alpha1.AgentRun, error) { return nil, nil }

// What a replay holds is what it compares, not what the recorded run's agents said: with the
// recording and the report alive, the heap holds a small part of a 16 MiB transcript, and the
// replay reproduces the run.
func TestAReplayHoldsWhatItComparesNotTheAnswers(t *testing.T) {
	store := open(t)
	p := planOf(t, helpdesk(16))
	run, written := recordTicket(t, store, p, 16, 1<<20)
	before := liveHeap()
	budget := &stored.Budget{}
	rec, err := stored.Read(context.Background(), store, run, noBranches, budget)
	if err != nil {
		t.Fatal(err)
	}
	r := replay.Run(p, rec, replay.Options{})
	held := liveHeap() - before
	runtime.KeepAlive(rec)
	if !r.Same() || r.Err != nil {
		t.Fatalf("replayed %s, diverged %d, stopped %q, err %v", r.Replayed.Reason, r.Diverged, r.Stopped, r.Err)
	}
	if held > 4<<20 {
		t.Errorf("the replay of a %d-byte transcript holds %d bytes", written, held)
	}
	// Each step's record is read twice: once digested, once when its turn comes.
	if budget.Read() != 2*written {
		t.Errorf("read %d bytes of a %d-byte transcript; want each step's record twice", budget.Read(), written)
	}
}

// liveHeap is the bytes the heap holds once what is no longer reachable is collected.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// A replay reads no more than its budget: past it while digesting, or while reading steps back,
// it says how much it read and what the budget is.
func TestAReplayPastItsBudgetSaysWhatItReadAndTheBudget(t *testing.T) {
	store := open(t)
	p := planOf(t, helpdesk(8))
	run, written := recordTicket(t, store, p, 8, 64<<10)
	cases := map[string]struct {
		max      int64
		reading  bool
		replayed bool
	}{
		"while digesting the transcript": {max: written / 2, reading: true},
		"while reading the steps back":   {max: written + written/2, replayed: true},
		"within it":                      {max: 2 * written},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			budget := &stored.Budget{Max: tc.max}
			rec, err := stored.Read(context.Background(), store, run, noBranches, budget)
			var exceeded *stored.ExceededError
			if tc.reading {
				if !errors.As(err, &exceeded) || exceeded.Max != tc.max || exceeded.Read <= tc.max || exceeded.Read > tc.max+written/4 {
					t.Fatalf("read with budget %d: %v", tc.max, err)
				}
				if want := stored.Bytes(tc.max); !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say the budget, %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := replay.Run(p, rec, replay.Options{})
			switch {
			case tc.replayed && (!errors.As(r.Err, &exceeded) || exceeded.Max != tc.max || r.Same()):
				t.Fatalf("replayed past the budget: err %v, stopped %q", r.Err, r.Stopped)
			case !tc.replayed && (r.Err != nil || !r.Same()):
				t.Fatalf("replayed within the budget: err %v, stopped %q", r.Err, r.Stopped)
			}
		})
	}
}

// The branch runs of a run's fan-outs are read as the caller lists them, each within the same
// budget, and the replay reproduces the run with them.
func TestTheBranchRunsAreReadWithinTheSameBudget(t *testing.T) {
	store := open(t)
	p := planOf(t, research())
	run, branches := recordResearch(t, store, p, 16<<10)
	listed := 0
	lister := func(_ context.Context, of *v1alpha1.AgentRun) ([]v1alpha1.AgentRun, error) {
		listed++
		if of.Name != run.Name {
			t.Errorf("branches of %s listed", of.Name)
		}
		return branches, nil
	}
	budget := &stored.Budget{}
	rec, err := stored.Read(context.Background(), store, run, lister, budget)
	if err != nil {
		t.Fatal(err)
	}
	r := replay.Run(p, rec, replay.Options{})
	if !r.Same() || len(r.Branches) != 2 || listed != 1 {
		t.Fatalf("diverged %d, stopped %q, %d branches replayed, listed %d times", r.Diverged, r.Stopped, len(r.Branches), listed)
	}
	if budget.Read() < 2*2*(16<<10) {
		t.Errorf("read %d bytes: the branches' records were not counted", budget.Read())
	}
	budget = &stored.Budget{Max: budget.Read() - 1}
	rec, err = stored.Read(context.Background(), store, run, lister, budget)
	var exceeded *stored.ExceededError
	if err == nil {
		err = replay.Run(p, rec, replay.Options{}).Err
	}
	if !errors.As(err, &exceeded) {
		t.Errorf("a byte short of what the run and its branches take: %v", err)
	}
}

// A recorded run that cannot be replayed as recorded is a RecordingError, which another replay
// would find again; a run deleted during the replay is one too.
func TestARunThatCannotBeReplayedIsSaidSo(t *testing.T) {
	store := open(t)
	p := planOf(t, helpdesk(4))
	run, _ := recordTicket(t, store, p, 4, 100)
	var unreadable *stored.RecordingError

	never := run.DeepCopy()
	never.Status.StartTime = nil
	if _, err := stored.Read(context.Background(), store, never, noBranches, &stored.Budget{}); !errors.As(err, &unreadable) ||
		err.Error() != "run ticket never started: there is nothing to replay" {
		t.Errorf("a run that never started: %v", err)
	}

	rec, err := stored.Read(context.Background(), store, run, noBranches, &stored.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(context.Background(), string(run.UID)); err != nil {
		t.Fatal(err)
	}
	r := replay.Run(p, rec, replay.Options{})
	if !errors.As(r.Err, &unreadable) || !strings.Contains(r.Err.Error(), "the run was deleted during the replay") {
		t.Errorf("a run deleted during its replay: %v", r.Err)
	}
}
