package agentrun

import (
	"context"
	"encoding/json"
	"slices"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// load is the run a reconcile works on (state.go): the freshest copy of it, with its status
// whole. A status decided and held is whole already; else what status holds only the
// beginning of (the next agent's input, the handoff history) is put back from what this
// operator wrote last, or, the first time it works on the run, from the transcript.
func (r *Reconciler) load(ctx context.Context, cached *v1alpha1.AgentRun) (*working, error) {
	run, ahead := r.runs.latestOf(cached)
	r.runs.dropStale(run)
	// stored shares its lists and pointers with the run's status: nothing writes into a
	// status's lists or through its pointers in place (the core copies a status before it
	// changes it; the shell sets new values), and a whole status gets lists of its own.
	w := &working{AgentRun: run, stored: run.Status, ahead: ahead}
	stored, whole, out := r.runs.outgoing(run)
	if out {
		// A status handed to the writer is what the API server will hold; the run goes on
		// from it (writer.go).
		w.stored = stored
		w.Status = whole
	}
	if w.stored.Phase.Terminal() {
		return w, nil
	}
	if status, held := r.runs.heldStatus(w); held {
		w.Status = status
		return w, nil
	}
	if out {
		return w, nil
	}
	input, inputOK, history, historyOK := r.runs.wholeParts(run, &run.Status)
	if !inputOK && run.Status.InputDigest != "" {
		var err error
		if input, inputOK, err = r.findInput(ctx, run); err != nil {
			return nil, err
		}
	}
	if !historyOK && len(run.Status.HandoffSequence) > 0 {
		var err error
		if history, err = r.findHistory(ctx, run); err != nil {
			return nil, err
		}
		historyOK = true
	}
	switch {
	case inputOK:
		w.Status.Input = input
	case run.Status.InputDigest != "":
		log.FromContext(ctx).Error(nil, "The whole input of the next step is not in the transcript; the agent gets its beginning",
			"agentRun", klog.KObj(run), "step", run.Status.StepCount+1, "inputDigest", run.Status.InputDigest)
		w.Status.InputDigest = ""
	}
	if historyOK {
		w.Status.HandoffSequence = history
	}
	r.runs.keepWhole(run, input, slices.Clone(history))
	return w, nil
}

// findInput looks for the run's whole input in the transcript: an input is always the run's
// own input, the last step's input or output, or what a person's decision made of it, recorded
// with the decision (as is the input of a run started from another).
func (r *Reconciler) findInput(ctx context.Context, run *v1alpha1.AgentRun) (string, bool, error) {
	st := &run.Status
	var candidates []string
	if st.LastDecision > 0 || run.Spec.From != nil {
		rec, ok, err := r.Transcript.Get(ctx, string(run.UID), records.DecisionKey(st))
		if err != nil {
			return "", false, err
		}
		var body records.DecisionBody
		if ok && json.Unmarshal(rec.Body, &body) == nil {
			candidates = append(candidates, body.Input)
		}
	}
	if n := len(st.HandoffSequence); n > 0 && st.HandoffSequence[n-1].Outcome == v1alpha1.OutcomeJoined {
		rec, ok, err := r.Transcript.Get(ctx, string(run.UID), records.JoinKey(st))
		if err != nil {
			return "", false, err
		}
		var body records.DecisionBody
		if ok && json.Unmarshal(rec.Body, &body) == nil {
			candidates = append(candidates, body.Input)
		}
	}
	if st.StepCount > 0 {
		rec, ok, err := r.Transcript.Get(ctx, string(run.UID), transcript.Key{Kind: transcript.KindStep, Step: st.StepCount})
		if err != nil {
			return "", false, err
		}
		var body records.StepBody
		if ok && json.Unmarshal(rec.Body, &body) == nil {
			candidates = append(candidates, body.Output, body.Input)
		}
	}
	candidates = append(candidates, run.Spec.Input)
	for _, c := range candidates {
		if workflow.IsInput(st, c) {
			return c, true, nil
		}
	}
	return "", false, nil
}

// findHistory puts the run's whole handoff sequence together again from the transcript, where
// each step's record carries the handoff record of the step before it: the newest records,
// read a page at a time. A run started from an earlier one holds copies of the earlier run's
// steps, whose records carry the handoffs before them too.
func (r *Reconciler) findHistory(ctx context.Context, run *v1alpha1.AgentRun) ([]v1alpha1.HandoffRecord, error) {
	st := &run.Status
	var seen []v1alpha1.HandoffRecord
	results := map[int32]workflow.StepResult{}
	q := transcript.Query{RunUID: string(run.UID), Kinds: []transcript.Kind{transcript.KindStep}, Newest: true,
		Limit: workflow.HistoryLength + 1, MaxBytes: records.ReadPage}
	for read := 0; read < workflow.HistoryLength+1; {
		recs, err := r.Transcript.List(ctx, q)
		if err != nil {
			return nil, err
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
	return slices.Clone(workflow.RestoreHistory(st.HandoffSequence, seen, results)), nil
}
