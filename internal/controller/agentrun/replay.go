package agentrun

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run with spec.replay replays a recorded run of its namespace on its config as it is now,
// in the reconcile (internal/replay): each agent answers with its recorded turns, read from the
// recorded run's transcript a page at a time; no agent or tool is called, so the run is
// admitted by no quota and counts no tokens or cost of its own. It ends at once, Succeeded with
// reason Replayed, and status.replay says what the replay found; its handoff sequence is the
// replayed one.

// startReplay replays the recorded run spec.replay names, and ends the run with what it found.
func (r *Reconciler) startReplay(ctx context.Context, w *working, now time.Time) (ctrl.Result, error) {
	run := w.AgentRun
	if run.Spec.From != nil || run.Spec.Branch != nil {
		return r.write(ctx, w, nil, workflow.Fail(run.Status, v1alpha1.ReasonConfigInvalid,
			"spec.replay replays a recorded run from its start: it goes with neither spec.from nor spec.branch", now))
	}
	recorded := &v1alpha1.AgentRun{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.Replay.Run}, recorded)
	if apierrors.IsNotFound(err) {
		return r.write(ctx, w, nil, workflow.Fail(run.Status, v1alpha1.ReasonConfigInvalid,
			fmt.Sprintf("spec.replay: run %s does not exist in namespace %s", run.Spec.Replay.Run, run.Namespace), now))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	// A replay calls no agent: it needs no Secret. It runs under the recorded run's limits and
	// approvals, as kubectl baton replay does.
	plan, revision, res, err := r.pinCurrent(ctx, w, recorded.Spec.Limits, now, false)
	if plan == nil || err != nil {
		return res, err
	}
	rec, err := r.recording(ctx, recorded)
	if err != nil {
		return r.write(ctx, w, nil, workflow.Fail(run.Status, v1alpha1.ReasonConfigInvalid, "spec.replay: "+err.Error(), now))
	}
	// Recorded approvals are judged against the recorded run's creator.
	plan = plan.ForRun(run.Name, run.Namespace, recorded.Spec.Approvals, r.creatorOf(ctx, recorded))
	if b := recorded.Spec.Branch; b != nil {
		// A branch run replays as it ran: from its agent, as deep as it was.
		plan = plan.AsBranch(b.Agent, b.Depth)
	}
	report := replay.Run(plan, rec, replay.Options{})
	st := run.Status
	st.ConfigRevision = revision
	d := workflow.Fail(st, v1alpha1.ReasonReplayed, replayMessage(recorded.Name, report), now)
	d.Status.Replay = replayStatus(recorded.Name, report)
	d.Status.HandoffSequence = report.Replayed.Path[max(0, len(report.Replayed.Path)-workflow.HistoryLength):]
	return r.write(ctx, w, nil, d)
}

// recording is the recorded run's recording, from its transcript, a page at a time, with its
// branch runs' recordings, within what an export of it would hold.
func (r *Reconciler) recording(ctx context.Context, recorded *v1alpha1.AgentRun) (replay.Recording, error) {
	return r.recordingAt(ctx, recorded, 0, &records.ExportBudget{})
}

// recordingAt is the recording of a run nested depth deep in the recorded run's branches.
func (r *Reconciler) recordingAt(ctx context.Context, recorded *v1alpha1.AgentRun, depth int, budget *records.ExportBudget) (replay.Recording, error) {
	b, err := replay.NewBuilder(recorded.Name, recorded.Spec, recorded.Status)
	if err != nil {
		return replay.Recording{}, err
	}
	kinds := []transcript.Kind{transcript.KindStep, transcript.KindDecision, transcript.KindToolTurn, transcript.KindTool}
	err = records.Each(ctx, r.Transcript, transcript.Query{RunUID: string(recorded.UID), Kinds: kinds}, func(rec transcript.Record) (bool, error) {
		if err := budget.AddRecords(recorded.Name, 1); err != nil {
			return false, err
		}
		return true, b.Add(records.FromStore(rec))
	})
	if err != nil {
		return replay.Recording{}, err
	}
	rec := b.Recording()
	if recorded.Status.BranchesStarted == 0 {
		return rec, nil
	}
	list, err := r.labelledBranches(ctx, recorded)
	if err != nil {
		return replay.Recording{}, err
	}
	for i := range list.Items {
		branch := &list.Items[i]
		if !workflow.IsBranchOf(branch, recorded) {
			continue
		}
		if err := budget.AddBranch(recorded.Name, depth+1); err != nil {
			return replay.Recording{}, err
		}
		child, err := r.recordingAt(ctx, branch, depth+1, budget)
		if err != nil {
			return replay.Recording{}, fmt.Errorf("branch %s: %w", branch.Name, err)
		}
		rec.Branches = append(rec.Branches, child)
	}
	return rec, nil
}

// replayMessage says in a line what the replay found.
func replayMessage(run string, rep replay.Report) string {
	switch {
	case rep.Same():
		return fmt.Sprintf("replayed run %s on the config as it is now: it ran the same path, tokens and end (%s)", run, rep.Replayed.Reason)
	case rep.Stopped != "":
		return fmt.Sprintf("replayed run %s on the config as it is now: the replay stopped: %s", run, rep.Stopped)
	case rep.Diverged == 0:
		return fmt.Sprintf("replayed run %s on the config as it is now: the same path, which ends %s (recorded: %s) with %d tokens (recorded: %d)",
			run, orPhase(rep.Replayed), orPhase(rep.Recorded), rep.Replayed.Tokens, rep.Recorded.Tokens)
	}
	return fmt.Sprintf("replayed run %s on the config as it is now: the paths part at handoff %d; it ends %s (recorded: %s)",
		run, rep.Diverged, orPhase(rep.Replayed), orPhase(rep.Recorded))
}

func orPhase(s replay.Summary) string {
	if s.Reason != "" {
		return string(s.Reason)
	}
	return string(s.Phase)
}

// replayStatus is status.replay of what the replay found.
func replayStatus(run string, rep replay.Report) *v1alpha1.ReplayStatus {
	outcome := func(s replay.Summary) v1alpha1.ReplayOutcome {
		return v1alpha1.ReplayOutcome{Phase: s.Phase, Reason: s.Reason, Message: textbound.Status(s.Message, 1024),
			Steps: s.Steps, Tokens: s.Tokens, Cost: s.Cost}
	}
	return &v1alpha1.ReplayStatus{Run: run, Diverged: int32(rep.Diverged), Stopped: textbound.Status(rep.Stopped, 1024),
		Recorded: outcome(rep.Recorded), Replayed: outcome(rep.Replayed)}
}
