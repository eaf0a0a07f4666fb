package agentrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// errFrom is a spec.from that cannot be followed; the run ends saying why.
var errFrom = errors.New("spec.from")

// startFrom starts a run where an earlier run was after one of its steps, on the config as it
// is now, as any run starts: the earlier run's steps and decisions are replayed from its
// transcript (workflow.Replay says which gates and tool calls they pass), the transcript up to
// that step is copied to the new run, and the new run starts there. The earlier run is only
// read.
func (r *Reconciler) startFrom(ctx context.Context, w *working, plan *workflow.Plan, revision string, now time.Time) (ctrl.Result, error) {
	run, earlier := w.AgentRun, w.start.earlier
	from := run.Spec.From
	replayed, err := r.replayFrom(ctx, run, earlier, plan)
	if err != nil {
		return ctrl.Result{}, err // errFrom: the run ends saying why (beginAction)
	}
	if err := r.copyFrom(ctx, run, earlier); err != nil {
		return ctrl.Result{}, err
	}
	if replayed.Taint == nil {
		// Untrusted content the earlier run had read by that step, from wherever it came.
		replayed.Taint = workflow.TaintedBefore(earlier.Status.Taint, from.Step)
	}
	d := workflow.StartFrom(plan, replayed, run.Spec.Input, revision, from.Run, from.Step, now)
	d.Status.Limits, d.Status.Kueue = run.Status.Limits, run.Status.Kueue
	// The next agent's whole input, which status holds only the beginning of, is found here
	// after a restart (findInput).
	if _, err := r.Transcript.Append(ctx, records.DecisionBody{Input: d.Status.Input}.Record(idOf(run), &d.Status, now)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the run's input to the transcript: %w", err)
	}
	r.runs.setPlan(run, plan)
	return r.write(ctx, w, plan, d)
}

// earlierRun is the run spec.from names, if a run can start from it.
func (r *Reconciler) earlierRun(ctx context.Context, run *v1alpha1.AgentRun) (*v1alpha1.AgentRun, error) {
	from := run.Spec.From
	earlier := &v1alpha1.AgentRun{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: from.Run}, earlier)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: run %s does not exist in namespace %s", errFrom, from.Run, run.Namespace)
	case err != nil:
		return nil, err
	case earlier.Spec.ConfigRef.Name != run.Spec.ConfigRef.Name:
		return nil, fmt.Errorf("%w: run %s ran AgentConfig %s, not %s", errFrom, from.Run, earlier.Spec.ConfigRef.Name, run.Spec.ConfigRef.Name)
	case earlier.Status.ConfigRevision == "" || earlier.Status.StartTime == nil:
		return nil, fmt.Errorf("%w: run %s has not started", errFrom, from.Run)
	case from.Step > earlier.Status.StepCount:
		return nil, fmt.Errorf("%w: run %s has taken %d steps, not %d", errFrom, from.Run, earlier.Status.StepCount, from.Step)
	}
	return earlier, nil
}

// replayFrom rebuilds the earlier run's status after the step spec.from names, on the new run's
// plan, reading the earlier run's transcript a page at a time.
func (r *Reconciler) replayFrom(ctx context.Context, run, earlier *v1alpha1.AgentRun, plan *workflow.Plan) (v1alpha1.AgentRunStatus, error) {
	last := run.Spec.From.Step
	var earlierCreator string
	if r.Trust.Trusted(ctx) {
		earlierCreator = earlier.Annotations[v1alpha1.AnnotationCreatedBy]
	}
	replay := workflow.NewReplay(plan, earlier.Name, earlierCreator, earlier.Spec.Input, earlier.Status.ConfigRevision, earlier.Status.StartTime.Time)
	calls := map[int32][]workflow.RecordedCall{}
	kinds := []transcript.Kind{transcript.KindStep, transcript.KindDecision, transcript.KindTool}
	err := records.Each(ctx, r.Transcript, transcript.Query{RunUID: string(earlier.UID), Kinds: kinds}, func(rec transcript.Record) (bool, error) {
		switch {
		case rec.Step > last:
		case rec.Kind == transcript.KindTool:
			calls[rec.Step] = append(calls[rec.Step], records.FromStore(rec).ToolCall())
		case rec.Kind == transcript.KindDecision:
			for _, d := range records.FromStore(rec).Decided() {
				replay.Decided(rec.Step, d)
			}
		case rec.Kind == transcript.KindStep:
			res, err := records.ResultOf(rec)
			if err != nil {
				return false, fmt.Errorf("%w: %w", errFrom, err)
			}
			if err := replay.Step(rec.Step, workflow.RecordedStep{Result: res, Time: rec.Time, Calls: calls[rec.Step]}); err != nil {
				return false, fmt.Errorf("%w: run %s cannot be continued after step %d: %w", errFrom, earlier.Name, last, err)
			}
			delete(calls, rec.Step)
			return rec.Step < last, nil
		}
		return true, nil
	})
	if err != nil {
		return v1alpha1.AgentRunStatus{}, err
	}
	st, err := replay.Status()
	switch {
	case err != nil:
		return st, fmt.Errorf("%w: run %s cannot be continued after step %d: %w", errFrom, earlier.Name, last, err)
	case st.StepCount != last:
		return st, fmt.Errorf("%w: run %s's transcript does not hold step %d", errFrom, earlier.Name, st.StepCount+1)
	}
	return st, nil
}

// copyFrom copies the earlier run's steps up to spec.from's, and the decisions between them,
// to the new run's transcript, a page at a time. Copies keep their keys, so a copy made again
// after a restart stores nothing twice.
func (r *Reconciler) copyFrom(ctx context.Context, run, earlier *v1alpha1.AgentRun) error {
	last := run.Spec.From.Step
	var page []transcript.Record
	size := 0
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		_, err := r.Transcript.Append(ctx, page...)
		page, size = page[:0], 0
		if err != nil {
			return fmt.Errorf("copying run %s's transcript: %w", earlier.Name, err)
		}
		return nil
	}
	kinds := []transcript.Kind{transcript.KindStep, transcript.KindDecision}
	err := records.Each(ctx, r.Transcript, transcript.Query{RunUID: string(earlier.UID), Kinds: kinds}, func(rec transcript.Record) (bool, error) {
		if rec.Kind == transcript.KindStep && rec.Step > last {
			return false, nil
		}
		if rec.Step > last || rec.Kind == transcript.KindDecision && rec.Step == last {
			return true, nil
		}
		rec.Seq, rec.RunUID, rec.Namespace, rec.Run = 0, string(run.UID), run.Namespace, run.Name
		page = append(page, rec)
		if size += len(rec.Body); size >= records.ReadPage {
			return true, flush()
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return flush()
}
