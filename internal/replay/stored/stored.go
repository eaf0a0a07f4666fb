// Package stored reads a recorded run from the transcript store for a replay on the cluster
// (spec.replay), in bounded memory and within a byte budget. The transcript is read a page at
// a time, and each page is dropped once digested: the recording keeps of each step what orders
// the turns, and each step's record is read again when the replay takes its turn
// (replay.Builder.Reload). Every byte read, both times, counts against the replay's Budget, as
// do the records and branch runs an export would hold. Branch runs are found by the caller,
// which knows the cluster: this package knows only the store.
package stored

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/transcript"
)

// Budget bounds what one replay reads: bytes of the recorded run's transcript and its branch
// runs', and the records and branch runs an export holds (records.ExportBudget). It is used by
// one replay at a time.
type Budget struct {
	// Max is the most bytes of record bodies the replay may read; 0 is no bound.
	Max int64

	read   int64
	export records.ExportBudget
}

// Read is how many bytes of record bodies the replay read so far.
func (b *Budget) Read() int64 { return b.read }

// add counts n more bytes read.
func (b *Budget) add(n int) error {
	b.read += int64(n)
	if b.Max > 0 && b.read > b.Max {
		return &ExceededError{Read: b.read, Max: b.Max}
	}
	return nil
}

// ExceededError is a replay that read more than its Budget allows: past Max bytes, or past an
// export's bounds (Bound says which).
type ExceededError struct {
	Read, Max int64
	Bound     string
}

func (e *ExceededError) Error() string {
	if e.Bound != "" {
		return e.Bound
	}
	return fmt.Sprintf("the replay read %s of transcripts, more than the %s a replay may read", Bytes(e.Read), Bytes(e.Max))
}

// Bytes says n bytes in words a person reads: exact, then in MiB.
func Bytes(n int64) string {
	return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
}

// RecordingError is a recorded run that cannot be replayed as it is recorded: it never started,
// started from another run, or a record cannot be read as one. Another replay of it finds the
// same.
type RecordingError struct{ Err error }

func (e *RecordingError) Error() string { return e.Err.Error() }
func (e *RecordingError) Unwrap() error { return e.Err }

// Branches lists the branch runs of run's fan-outs: the runs the operator made as its branches,
// not ones that only look like them.
type Branches func(ctx context.Context, run *v1alpha1.AgentRun) ([]v1alpha1.AgentRun, error)

// Read reads run's recording from store, with its branch runs' (found by branches), within
// budget. The recording reads each step's record back from store when the replay takes its
// turn, with ctx: the replay must be made while ctx lasts, and its report's Err is then the
// error of that read, if one failed.
func Read(ctx context.Context, store transcript.Store, run *v1alpha1.AgentRun, branches Branches, budget *Budget) (replay.Recording, error) {
	return read(ctx, store, run, branches, budget, 0)
}

// kinds are the records a replay reads.
var kinds = []transcript.Kind{transcript.KindStep, transcript.KindDecision, transcript.KindToolTurn, transcript.KindTool}

// read reads the recording of run, nested depth deep in the recorded run's branches.
func read(ctx context.Context, store transcript.Store, run *v1alpha1.AgentRun, branches Branches, budget *Budget, depth int) (replay.Recording, error) {
	b, err := replay.NewBuilder(run.Name, run.Spec, run.Status)
	if err != nil {
		return replay.Recording{}, &RecordingError{err}
	}
	b.Reload = reload(ctx, store, run, budget)
	err = records.Each(ctx, store, transcript.Query{RunUID: string(run.UID), Kinds: kinds}, func(r transcript.Record) (bool, error) {
		if err := budget.export.AddRecords(run.Name, 1); err != nil {
			return false, &ExceededError{Read: budget.read, Max: budget.Max, Bound: err.Error()}
		}
		if err := budget.add(len(r.Body)); err != nil {
			return false, err
		}
		if err := b.Add(records.FromStore(r)); err != nil {
			return false, &RecordingError{err}
		}
		return true, nil
	})
	if err != nil {
		return replay.Recording{}, readError(run, err)
	}
	rec := b.Recording()
	if run.Status.BranchesStarted == 0 {
		return rec, nil
	}
	list, err := branches(ctx, run)
	if err != nil {
		return replay.Recording{}, fmt.Errorf("listing the branch runs of run %s: %w", run.Name, err)
	}
	for i := range list {
		if err := budget.export.AddBranch(run.Name, depth+1); err != nil {
			return replay.Recording{}, &ExceededError{Read: budget.read, Max: budget.Max, Bound: err.Error()}
		}
		child, err := read(ctx, store, &list[i], branches, budget, depth+1)
		if err != nil {
			return replay.Recording{}, fmt.Errorf("branch %s: %w", list[i].Name, err)
		}
		rec.Branches = append(rec.Branches, child)
	}
	return rec, nil
}

// readError is err, from reading run's transcript, said as the run's: the budget's and the
// recording's words are whole already.
func readError(run *v1alpha1.AgentRun, err error) error {
	var exceeded *ExceededError
	var unreadable *RecordingError
	if errors.As(err, &exceeded) || errors.As(err, &unreadable) {
		return err
	}
	return fmt.Errorf("reading the transcript of run %s: %w", run.Name, err)
}

// reload reads a step's record of run back from store, counting it against budget.
func reload(ctx context.Context, store transcript.Store, run *v1alpha1.AgentRun, budget *Budget) func(transcript.Key) (records.Record, error) {
	uid := string(run.UID)
	return func(k transcript.Key) (records.Record, error) {
		r, ok, err := store.Get(ctx, uid, k)
		switch {
		case err != nil:
			return records.Record{}, fmt.Errorf("reading step %d of run %s again: %w", k.Step, run.Name, err)
		case !ok:
			return records.Record{}, &RecordingError{fmt.Errorf("the record of step %d of run %s is gone: the run was deleted during the replay", k.Step, run.Name)}
		}
		if err := budget.add(len(r.Body)); err != nil {
			return records.Record{}, err
		}
		return records.FromStore(r), nil
	}
}
