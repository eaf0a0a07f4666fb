package agentrun

import (
	"context"
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// Status holds the latest handoff records without digests (workflow.StoreHistory); the loop
// detectors need the latest 50 with digests. The operator keeps the whole sequence from each
// status write to the next reconcile, and after a restart puts it together again from the
// transcript, where each step's record carries the handoff record of the step before it.

// keepHistory remembers the run's whole handoff sequence as written.
func (t *runTable) keepHistory(run *v1alpha1.AgentRun, whole []v1alpha1.HandoffRecord) {
	t.with(run, func(s *runState) { s.history = whole })
}

// history is the whole sequence remembered for the status's records, if any.
func (t *runTable) history(key types.NamespacedName, uid types.UID, stored []v1alpha1.HandoffRecord) ([]v1alpha1.HandoffRecord, bool) {
	var whole []v1alpha1.HandoffRecord
	ok := false
	t.existing(key, uid, func(s *runState) {
		if s.history != nil && workflow.IsStoredHistory(stored, s.history) {
			whole, ok = slices.Clone(s.history), true
		}
	})
	return whole, ok
}

// wholeHistory puts the whole handoff sequence into a status that holds its latest records.
func (r *Reconciler) wholeHistory(ctx context.Context, run *v1alpha1.AgentRun) error {
	st := &run.Status
	if len(st.HandoffSequence) == 0 {
		return nil
	}
	key := client.ObjectKeyFromObject(run)
	if whole, ok := r.runs.history(key, run.UID, st.HandoffSequence); ok {
		st.HandoffSequence = whole
		return nil
	}
	// A run started from an earlier one holds copies of the earlier run's steps: their records
	// carry the handoffs before them too. The newest records are read a page at a time.
	var seen []v1alpha1.HandoffRecord
	results := map[int32]workflow.StepResult{}
	q := transcript.Query{RunUID: string(run.UID), Kinds: []transcript.Kind{transcript.KindStep}, Newest: true,
		Limit: workflow.HistoryLength + 1, MaxBytes: records.ReadPage}
	for read := 0; read < workflow.HistoryLength+1; {
		recs, err := r.Transcript.List(ctx, q)
		if err != nil {
			return err
		}
		var page []v1alpha1.HandoffRecord
		for _, rec := range recs {
			var body records.StepBody
			if json.Unmarshal(rec.Body, &body) != nil {
				continue
			}
			if body.Previous != nil {
				page = append(page, *body.Previous)
			}
			if rec.Step >= st.HandoffSequence[0].Step {
				// Only the steps status holds need their results' digests.
				results[rec.Step] = body.StepResult()
			}
		}
		seen = append(page, seen...)
		if read += len(recs); len(recs) == 0 || len(recs) == q.Limit {
			break
		}
		q.Before, q.Limit = recs[0].Seq, q.Limit-len(recs)
	}
	whole := workflow.RestoreHistory(st.HandoffSequence, seen, results)
	r.runs.keepHistory(run, whole)
	st.HandoffSequence = slices.Clone(whole)
	return nil
}

// whole puts back what status holds only the beginning of: the next agent's input and the
// handoff history. The workflow core sees them whole.
func (r *Reconciler) whole(ctx context.Context, run *v1alpha1.AgentRun) error {
	if err := r.wholeInput(ctx, run); err != nil {
		return err
	}
	return r.wholeHistory(ctx, run)
}
