package steps

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// updates keeps in the transcript what a remote agent reports while it works on a step, up to
// records.MaxProgressPerStep records. Reports are written in order, each before the next is
// taken; one the store refuses is left out, and the step goes on. A config's Output guardrails
// are asked about each report's text before it is recorded, as about the step's answer: a
// redaction is what is recorded, and a text they block or would hold for review is withheld
// (the step's answer is screened, and held, when it comes).
type updates struct {
	store transcript.Store
	rid   records.RunID
	step  int32
	agent string
	// screen asks the Output guardrails about a report's text; nil when there are none.
	screen func(ctx context.Context, text string) guardrails.Screened

	mu sync.Mutex
	n  int32
}

func (u *updates) Report(ctx context.Context, state, text string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n >= records.MaxProgressPerStep {
		return
	}
	u.n++
	var verdicts []records.GuardVerdict
	if u.screen != nil && text != "" {
		// Bounded by the guardrails' own timeouts; the write below has its own.
		s := u.screen(ctx, text)
		text, verdicts = s.Text, s.Verdicts
		if s.Blocked != nil || s.Gated != nil {
			text = "(withheld by the config's Output guardrails; the step's answer is screened when it comes)"
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rec := records.NewProgress(u.rid, u.step, u.n, u.agent, state, text, verdicts, time.Now())
	if _, err := u.store.Append(wctx, rec); err != nil {
		log.FromContext(ctx).V(1).Info("A remote agent's progress was not recorded", "step", u.step, "error", err.Error())
	}
}

// remoteTask is the task a remote agent kept open when it asked for input in the step before
// this one: the step's input is the reply that continues it. Only such a step reads the
// transcript for it.
func (s *Runner) remoteTask(ctx context.Context, rid records.RunID, from *v1alpha1.AgentRunStatus, step workflow.Step) (string, error) {
	prev := previous(*from, step.Number)
	if prev == nil || prev.From != step.Agent || prev.Outcome != v1alpha1.OutcomeSignal || prev.Reason != workflow.ReasonInputRequired {
		return "", nil
	}
	rec, found, err := s.Store.Get(ctx, rid.UID, transcript.Key{Kind: transcript.KindStep, Step: step.Number - 1})
	if err != nil || !found {
		return "", err
	}
	res, err := records.ResultOf(rec)
	if err != nil {
		return "", err
	}
	return res.RemoteTask, nil
}
