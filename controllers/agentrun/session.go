package agentrun

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentsession"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/sessions"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// A turn of a session (spec.session) starts once its session lets it: the session exists, has
// not ended, and every turn numbered before it has ended. Turns are found in the cache by the
// session they name (agentsession.Index).

// turn is what a turn starts from of its session: its limits, what its other turns used of
// them, and the state the turn before it led to.
type turn struct {
	session string
	limits  *v1alpha1.SessionLimits
	history *v1alpha1.SessionHistory
	tokens  int64
	spent   decimal.Decimal
	state   string
	// previous is the last turn before this one that started and ended: its history and its
	// answer are this one's history.
	previous *v1alpha1.AgentRun
	// others are the session's other turns.
	others []*v1alpha1.AgentRun
	// taint is the session's, from its status or a turn before this one: the turn starts
	// tainted.
	taint *v1alpha1.Taint
}

// sessionFacts gathers what a turn's start depends on of its session, and what it starts from
// (w.turn); nil for a run that is no turn.
func (r *Reconciler) sessionFacts(ctx context.Context, w *working) (*workflow.SessionFacts, error) {
	run := w.AgentRun
	if run.Spec.Session == nil {
		return nil, nil
	}
	f := &workflow.SessionFacts{Name: run.Spec.Session.Name}
	s := &v1alpha1.AgentSession{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: f.Name}, s)
	if apierrors.IsNotFound(err) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	f.Found = true
	if why, ok := s.Annotations[v1alpha1.AnnotationEnd]; ok && s.Status.Phase != v1alpha1.SessionEnded {
		// Ended by hand, before the session controller has written it: no waiting turn starts.
		f.EndReason, f.EndMessage = v1alpha1.SessionReasonEnded, why
	}
	if s.Status.Phase == v1alpha1.SessionEnded {
		f.EndReason, f.EndMessage = s.Status.EndReason, s.Status.EndMessage
		// Times are kept to the second: a turn created in the second its session ended came
		// after the end.
		f.EndedBefore = s.Status.EndTime != nil && !s.Status.EndTime.After(run.CreationTimestamp.Time)
	}
	list := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, list, client.InNamespace(run.Namespace), client.MatchingFields{agentsession.Index: f.Name}); err != nil {
		return nil, err
	}
	me, turns := agentsession.TurnOf(run), make([]sessions.Turn, 0, len(list.Items))
	byName := make(map[string]*v1alpha1.AgentRun, len(list.Items))
	for i := range list.Items {
		if o := &list.Items[i]; o.UID != run.UID {
			t := agentsession.TurnOf(o)
			if p := r.runs.heldPhase(o); p.Started() && !t.Phase.Started() {
				// Begun here, its start not written yet: it is at work all the same.
				t.Phase, t.Started = p, true
			}
			turns, byName[o.Name] = append(turns, t), o
		}
	}
	f.Before = sessions.WaitsFor(me, turns)
	used := sessions.UsageOf(&s.Status, turns)
	w.turn = &turn{session: s.Name, limits: s.Spec.Limits, history: s.Spec.History, tokens: used.Tokens, spent: used.Cost,
		taint: sessions.TaintOf(&s.Status, turns, &me)}
	for _, o := range byName {
		w.turn.others = append(w.turn.others, o)
	}
	if prev, ok := sessions.Previous(me, turns); ok {
		w.turn.previous = byName[prev.Name]
		if prev.Phase == v1alpha1.PhaseSucceeded {
			w.turn.state = prev.State
		}
	}
	if f.Before == "" && s.Spec.Limits != nil {
		// The session's status says so only once its controller has looked.
		_, f.Spent = sessions.Spent(*s.Spec.Limits, used)
	}
	return f, nil
}

// writeHistory records what the turn is given of its session's earlier turns before it starts:
// the history the turn before it was given, with that turn's question and answer added, within
// the session's bounds (sessions.History.Append); the turns that left the window, to be
// summarized before its first step; and the turn's own question. It reads three records of one
// earlier turn, however long the session. A turn begun again after a restart finds its record
// written.
func (r *Reconciler) writeHistory(ctx context.Context, w *working, now time.Time) (string, error) {
	run, t := w.AgentRun, w.turn
	body := records.HistoryBody{From: run.Annotations[v1alpha1.AnnotationCreatedBy], Input: run.Spec.Input}
	if t.history != nil && t.history.Summarizer != nil {
		body.Summarizer = t.history.Summarizer.Agent
	}
	if prev := t.previous; prev != nil {
		before, found, err := r.historyOf(ctx, prev)
		if err != nil {
			return "", fmt.Errorf("reading the history of turn %s: %w", prev.Name, err)
		}
		if found {
			answer, err := r.lastOutput(ctx, prev)
			if err != nil {
				return "", err
			}
			bounds := sessions.BoundsOf(t.history)
			var left []sessions.Exchange
			body.History, left = before.History.Append(sessions.Exchange{Turn: prev.Name, From: before.From, Input: before.Input, Output: answer}, bounds)
			if bounds.Summarize {
				// Turns the turn before did not get summarized (its summary failed) are summarized now.
				body.Fold = sessions.ToFold(lastOf(append(before.Fold, left...), maxFold))
			}
		}
	}
	if _, err := r.Transcript.Append(ctx, body.Record(idOf(run), now)); err != nil {
		return "", fmt.Errorf("writing the turn's history to the transcript: %w", err)
	}
	return body.History.Digest(), nil
}

// earlierTurns are the turns before run given the same history as it, oldest first (turns
// holds the session's other turns): the loop detectors that see across turns compare run's
// steps with theirs.
func earlierTurns(run *v1alpha1.AgentRun, digest string, turns []*v1alpha1.AgentRun) []*v1alpha1.AgentRun {
	type turned struct {
		run  *v1alpha1.AgentRun
		turn sessions.Turn
	}
	me := agentsession.TurnOf(run)
	var same []turned
	for _, o := range turns {
		if t := agentsession.TurnOf(o); o.UID != run.UID && o.Status.HistoryDigest == digest && o.Status.Phase.Terminal() && sessions.Before(t, me) {
			same = append(same, turned{o, t})
		}
	}
	slices.SortFunc(same, func(a, b turned) int { return sessions.Compare(a.turn, b.turn) })
	out := make([]*v1alpha1.AgentRun, len(same))
	for i, t := range same {
		out[i] = t.run
	}
	return out
}

// withEarlier is plan with the steps and runs of a turn's earlier turns given the same history
// (workflow.Plan.WithEarlierTurns). Status keeps no digests of steps: each step's are read from
// its record, the newest steps of each turn, as many as the detectors look at.
func (r *Reconciler) withEarlier(ctx context.Context, plan *workflow.Plan, turns []*v1alpha1.AgentRun) (*workflow.Plan, error) {
	if len(turns) == 0 {
		return plan, nil
	}
	var steps []v1alpha1.HandoffRecord
	uids := make([]string, 0, len(turns))
	for _, o := range turns {
		uids = append(uids, string(o.UID))
		recs, err := r.Transcript.List(ctx, transcript.Query{RunUID: string(o.UID), Kinds: []transcript.Kind{transcript.KindStep},
			Limit: workflow.MaxEarlierSteps, Newest: true, MaxBytes: records.ReadPage})
		if err != nil {
			return nil, fmt.Errorf("reading the steps of turn %s: %w", o.Name, err)
		}
		results := map[int32]workflow.StepResult{}
		for _, rec := range recs {
			if res, err := records.ResultOf(rec); err == nil {
				results[rec.Step] = res
			}
		}
		for _, h := range o.Status.HandoffSequence {
			if res, ok := results[h.Step]; ok {
				h.InputDigest, h.OutputDigest = workflow.StepDigests(res)
				steps = append(steps, h)
			}
		}
	}
	return plan.WithEarlierTurns(steps, uids), nil
}

// withEarlierTurns is a started turn's plan with its earlier turns given the same history, from
// the cache: after a restart, as at its start.
func (r *Reconciler) withEarlierTurns(ctx context.Context, plan *workflow.Plan, run *v1alpha1.AgentRun) (*workflow.Plan, error) {
	if run.Spec.Session == nil || run.Status.HistoryDigest == "" {
		return plan, nil
	}
	list := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, list, client.InNamespace(run.Namespace), client.MatchingFields{agentsession.Index: run.Spec.Session.Name}); err != nil {
		return nil, err
	}
	turns := make([]*v1alpha1.AgentRun, len(list.Items))
	for i := range list.Items {
		turns[i] = &list.Items[i]
	}
	return r.withEarlier(ctx, plan, earlierTurns(run, run.Status.HistoryDigest, turns))
}

// maxFold bounds the turns kept to be summarized, when summaries keep failing.
const maxFold = sessions.DefaultMaxTurns

func lastOf[T any](s []T, n int) []T { return s[max(len(s)-n, 0):] }

// historyOf is a turn's history record, with the summary made as it started in place of the one
// it was given; Fold is left only when no summary was made.
func (r *Reconciler) historyOf(ctx context.Context, turn *v1alpha1.AgentRun) (records.HistoryBody, bool, error) {
	rec, found, err := r.Transcript.Get(ctx, string(turn.UID), records.HistoryKey)
	if err != nil || !found {
		return records.HistoryBody{}, false, err
	}
	h, err := records.HistoryOf(rec)
	if err != nil {
		return h, false, err
	}
	rec, found, err = r.Transcript.Get(ctx, string(turn.UID), records.SummaryKey)
	if err != nil {
		return h, false, err
	}
	if found {
		s, err := records.SummaryOf(rec)
		if err != nil {
			return h, false, err
		}
		h.Summary, h.Fold = s.Summary, nil
	}
	return h, true, nil
}

// lastOutput is what a run's last step answered, in full, from its transcript.
func (r *Reconciler) lastOutput(ctx context.Context, run *v1alpha1.AgentRun) (string, error) {
	out, _, err := records.LastOutput(ctx, r.Transcript, string(run.UID))
	if err != nil {
		return "", fmt.Errorf("reading the last step of turn %s: %w", run.Name, err)
	}
	return out, nil
}

// sessionTurns maps an ended turn, or a session that changed, to the session's turns that have
// not started: the next of them may start now, or all of them end with the session.
func (r *Reconciler) sessionTurns(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetName()
	if run, ok := obj.(*v1alpha1.AgentRun); ok {
		if run.Spec.Session == nil {
			return nil
		}
		name = run.Spec.Session.Name
	}
	turns := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, turns, client.InNamespace(obj.GetNamespace()), client.MatchingFields{agentsession.Index: name}); err != nil {
		log.FromContext(ctx).Error(err, "Listing the turns of a session", "agentSession", klog.KRef(obj.GetNamespace(), name))
		return nil
	}
	var reqs []reconcile.Request
	for i := range turns.Items {
		if !turns.Items[i].Status.Phase.Started() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&turns.Items[i])})
		}
	}
	return reqs
}
