package replay

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// readKey is a record of a run.
type readKey struct {
	run string
	transcript.Key
}

// reloading builds the recording of an export as spec.replay builds one from the store: each
// step kept by its key, and read back from the export's records when its turn comes. reads
// counts the reads of each key.
func reloading(t testing.TB, e *records.Export, reads map[readKey]int, fail error) Recording {
	t.Helper()
	b, err := NewBuilder(e.Run, e.Spec, e.Status)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[transcript.Key]records.Record{}
	for _, r := range e.Records {
		byKey[transcript.Key{Kind: r.Kind, Step: r.Step, Attempt: r.Attempt, Call: r.Call}] = r
	}
	b.Reload = func(k transcript.Key) (records.Record, error) {
		reads[readKey{e.Run, k}]++
		if fail != nil {
			return records.Record{}, fail
		}
		return byKey[k], nil
	}
	for _, r := range e.Records {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.Recording()
	for i := range e.Branches {
		branch := reloading(t, &e.Branches[i], reads, fail)
		rec.Branches = append(rec.Branches, branch)
	}
	return rec
}

// A recording built to read its steps back holds no answer, and the replay reads each step's
// record once, when its turn comes, and reproduces the run as the whole recording does.
func TestARecordingThatReadsStepsBackHoldsNoAnswers(t *testing.T) {
	cases := map[string]struct {
		config *ConfigWrapper
		record func(*workflow.Plan) Recording
	}{
		"a run with gates":        {config: helpdesk().Gate("refund", "billing", 1), record: func(p *workflow.Plan) Recording { return billingTicket(t, p) }},
		"a run that fans out":     {config: research(2, v1alpha1.Join{}), record: func(p *workflow.Plan) Recording { return recordResearch(t, p) }},
		"a run with tool lookups": {config: lookups(), record: func(p *workflow.Plan) Recording { return withLookups(billingTicket(t, p), 2, false) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := plan(t, tc.config)
			e := exportOf(t, tc.record(p), tc.config.Obj().Spec)
			reads := map[readKey]int{}
			rec := reloading(t, e, reads, nil)
			for _, held := range append([]Recording{rec}, rec.Branches...) {
				for i, s := range held.Steps {
					if s.Result.Output != "" || len(s.Result.Parallel) > 0 || s.Result.Tokens != 0 {
						t.Fatalf("%s's step %d is held whole: %+v", held.Run, i+1, s.Result)
					}
				}
			}
			if len(reads) != 0 {
				t.Fatalf("steps read back before the replay: %v", reads)
			}
			r := Run(p, rec, Options{})
			whole := Run(p, readBack(t, e), Options{})
			if !r.Same() || r.Err != nil || r.Replayed.Output != whole.Replayed.Output || pathOf(r.Replayed.Path) != pathOf(whole.Replayed.Path) {
				t.Fatalf("replayed from reads: diverged %d, stopped %q, err %v, output %q (whole: %q)", r.Diverged, r.Stopped, r.Err, r.Replayed.Output, whole.Replayed.Output)
			}
			steps := 0
			for _, held := range append([]Recording{rec}, rec.Branches...) {
				steps += len(held.Steps)
			}
			if len(reads) != steps {
				t.Errorf("%d steps, %d read back", steps, len(reads))
			}
			for k, n := range reads {
				if n != 1 || k.Kind != transcript.KindStep {
					t.Errorf("record %+v read %d times", k, n)
				}
			}
		})
	}
}

// A step that cannot be read back stops the replay, and the report carries why: it found
// nothing.
func TestAStepThatCannotBeReadBackFailsTheReplay(t *testing.T) {
	for name, tc := range map[string]struct {
		config *ConfigWrapper
		record func(*workflow.Plan) Recording
	}{
		"in the run":      {config: helpdesk(), record: func(p *workflow.Plan) Recording { return billingTicket(t, p) }},
		"in a branch run": {config: research(2, v1alpha1.Join{}), record: func(p *workflow.Plan) Recording { return recordResearch(t, p) }},
	} {
		t.Run(name, func(t *testing.T) {
			p := plan(t, tc.config)
			e := exportOf(t, tc.record(p), tc.config.Obj().Spec)
			gone := errors.New("the store is gone")
			rec := reloading(t, e, map[readKey]int{}, nil)
			if name == "in a branch run" {
				rec.Branches[0] = reloading(t, &e.Branches[0], map[readKey]int{}, gone)
			} else {
				rec = reloading(t, e, map[readKey]int{}, gone)
			}
			r := Run(p, rec, Options{})
			if !errors.Is(r.Err, gone) || !strings.Contains(r.Stopped, "cannot be read: the store is gone") || r.Same() {
				t.Fatalf("err %v, stopped %q", r.Err, r.Stopped)
			}
		})
	}
}

// Without live turns, a replay keeps nothing of what the replayed run's agents said but its
// status: the context a live turn would be shown is not gathered.
func TestAReplayWithoutLiveTurnsKeepsNoContext(t *testing.T) {
	p := plan(t, helpdesk().Gate("refund", "billing", 1))
	r := newRunner(p, billingTicket(t, p), Options{})
	r.run()
	if r.st.Phase != v1alpha1.PhaseSucceeded || len(r.context) != 0 || r.last != "" {
		t.Fatalf("replayed %s; kept %d context entries and the last output %q", r.st.Phase, len(r.context), r.last)
	}
}
