package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/workflow"
	"github.com/baton-dev/baton/decisions"
	"github.com/baton-dev/baton/transcript"
)

// errFrom is a spec.from that cannot be followed; the run ends saying why.
var errFrom = errors.New("spec.from")

// startFrom starts a run where an earlier run was after one of its steps: it rebuilds the
// earlier run's status at that step from its transcript, on the config the earlier run pinned,
// copies the transcript up to that step to the new run, and starts the new run there. The
// earlier run is only read.
func (r *AgentRunReconciler) startFrom(ctx context.Context, run *v1alpha1.AgentRun, now time.Time) (ctrl.Result, error) {
	from := run.Spec.From
	plan, replayed, records, err := r.replayFrom(ctx, run)
	switch {
	case errors.Is(err, errFrom):
		return r.write(ctx, run, nil, workflow.Fail(run.Status, v1alpha1.ReasonConfigInvalid, err.Error(), now))
	case err != nil:
		return ctrl.Result{}, err
	}
	copies := make([]transcript.Record, 0, len(records))
	for _, rec := range records {
		rec.Seq, rec.RunUID, rec.Namespace, rec.Run = 0, string(run.UID), run.Namespace, run.Name
		copies = append(copies, rec)
	}
	if len(copies) > 0 {
		if _, err := r.transcript.Append(ctx, copies...); err != nil {
			return ctrl.Result{}, fmt.Errorf("copying run %s's transcript: %w", from.Run, err)
		}
	}
	return r.write(ctx, run, plan, workflow.StartFrom(plan, replayed, run.Spec.Input, from.Run, from.Step, now))
}

// replayFrom rebuilds the earlier run's status after the step spec.from names, and returns
// the new run's plan and the earlier run's records up to that step.
func (r *AgentRunReconciler) replayFrom(ctx context.Context, run *v1alpha1.AgentRun) (*workflow.Plan, v1alpha1.AgentRunStatus, []transcript.Record, error) {
	from := run.Spec.From
	var none v1alpha1.AgentRunStatus
	earlier := &v1alpha1.AgentRun{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: from.Run}, earlier)
	switch {
	case apierrors.IsNotFound(err):
		return nil, none, nil, fmt.Errorf("%w: run %s does not exist in namespace %s", errFrom, from.Run, run.Namespace)
	case err != nil:
		return nil, none, nil, err
	case earlier.Spec.ConfigRef.Name != run.Spec.ConfigRef.Name:
		return nil, none, nil, fmt.Errorf("%w: run %s ran AgentConfig %s, not %s", errFrom, from.Run, earlier.Spec.ConfigRef.Name, run.Spec.ConfigRef.Name)
	case earlier.Status.ConfigRevision == "" || earlier.Status.StartTime == nil:
		return nil, none, nil, fmt.Errorf("%w: run %s has not started", errFrom, from.Run)
	case from.Step > earlier.Status.StepCount:
		return nil, none, nil, fmt.Errorf("%w: run %s has taken %d steps, not %d", errFrom, from.Run, earlier.Status.StepCount, from.Step)
	}
	spec, err := r.revisions.spec(ctx, run.Namespace, earlier.Status.ConfigRevision)
	if errors.Is(err, errRevisionGone) {
		return nil, none, nil, fmt.Errorf("%w: the config run %s pinned (%s) no longer exists", errFrom, from.Run, earlier.Status.ConfigRevision)
	}
	if err != nil {
		return nil, none, nil, err
	}
	plan, errs := checkConfig(*spec, run.Spec.Limits, r.Providers)
	if len(errs) > 0 {
		return nil, none, nil, fmt.Errorf("%w: the config run %s pinned cannot run: %v", errFrom, from.Run, errs.ToAggregate())
	}
	plan = r.forRun(plan, run)

	all, err := r.transcript.List(ctx, transcript.Query{RunUID: string(earlier.UID), Kinds: []transcript.Kind{transcript.KindStep, transcript.KindDecision}})
	if err != nil {
		return nil, none, nil, fmt.Errorf("reading run %s's transcript: %w", from.Run, err)
	}
	steps := make([]workflow.RecordedStep, from.Step)
	var kept []transcript.Record
	for _, rec := range all {
		switch {
		case rec.Kind == transcript.KindStep && rec.Step >= 1 && rec.Step <= from.Step:
			res, err := stepResultOf(rec)
			if err != nil {
				return nil, none, nil, fmt.Errorf("%w: %v", errFrom, err)
			}
			steps[rec.Step-1].Result, steps[rec.Step-1].Time = res, rec.Time
			kept = append(kept, rec)
		case rec.Kind == transcript.KindDecision && rec.Step < from.Step:
			// People's words after a step, before the next: a reply answers the step.
			if reply := replyIn(rec); reply != nil && rec.Step >= 1 {
				steps[rec.Step-1].Reply = reply
			}
			kept = append(kept, rec)
		}
	}
	for i, s := range steps {
		if s.Result.Agent == "" {
			return nil, none, nil, fmt.Errorf("%w: run %s's transcript does not hold step %d", errFrom, from.Run, i+1)
		}
	}
	replayed, err := workflow.Replay(plan, earlier.Spec.Input, earlier.Status.ConfigRevision, earlier.Status.StartTime.Time, steps)
	if err != nil {
		return nil, none, nil, fmt.Errorf("%w: run %s cannot be continued after step %d: %v", errFrom, from.Run, from.Step, err)
	}
	return plan, replayed, kept, nil
}

// replyIn is the reply a decision record holds, as the decision that gave it.
func replyIn(rec transcript.Record) *decisions.Queued {
	for _, c := range contextOf(rec) {
		if c.Kind == agents.ContextReply {
			return &decisions.Queued{Seq: 1, Action: decisions.Reply, Reply: c.Text, By: c.From}
		}
	}
	return nil
}
