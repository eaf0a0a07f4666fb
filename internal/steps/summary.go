package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/sessions"
	"github.com/baton-dev/baton/internal/workflow"
)

// A session's turns that leave its window (compaction Summarize) are summarized in the first
// step of the turn that goes without them, before its request is made: the turn's history
// record names them (Fold), the summarizer agent is asked once, with no tools, handoffs or
// signals, metered as any model call (its namespace's caps, its endpoint's pace and prices, the
// run's budget), and the summary is recorded before the step's agent is asked. Its tokens and
// cost are the step's too; it is not a step, and the loop detectors do not see it. A summary
// that cannot be made leaves the turn without it: the next turn tries again.

// summaryUse is what a turn's summary call used.
type summaryUse struct {
	tokens, input int64
	cost          decimal.Decimal
	currency      string
}

// addTo counts the summary's use in the first step's result.
func (u *summaryUse) addTo(res *workflow.Result) {
	if u == nil {
		return
	}
	res.Tokens += u.tokens
	res.InputTokens += u.input
	if u.cost.IsPositive() {
		res.Cost = cost.Format(cost.Amount(res.Cost).Add(u.cost))
		if res.Currency == "" {
			res.Currency = u.currency
		}
	}
}

// summarize makes the turn's summary, if turns left its window and none was made before (a
// restart), and says what it used. An error is returned only for a summarizer that is no agent
// of the config: the turn fails, saying so.
func (c *stepCall) summarize(ctx context.Context) (*summaryUse, error) {
	h, ok := c.toFold(ctx)
	if !ok {
		return nil, nil
	}
	name := h.Summarizer
	if name == "" {
		name = c.plan.Entrypoint()
	}
	spec := c.plan.Agent(name)
	if spec == nil {
		return nil, fmt.Errorf("the session's history.summarizer.agent %q is not an agent of AgentConfig %s", name, c.config)
	}
	body := records.SummaryBody{Agent: name}
	for _, e := range h.Fold {
		body.Turns = append(body.Turns, e.Turn)
	}
	var use *summaryUse
	sc := c.r.newCall(c.rid, c.plan, spec, workflow.Step{Number: c.step.Number, Agent: name}, c.task, c.config, c.from)
	if scripted(spec) && spec.Model.EndpointRef == nil {
		// A Scripted summarizer keeps each turn's question and answer on a line: no model.
		body.Summary = sessions.PlainSummary(h.Summary, h.Fold)
	} else {
		res, err := sc.summaryCall(ctx, h)
		if err != nil {
			c.r.Log.Error(err, "Summarizing a session's earlier turns; the turn goes on without the summary", "agentRun", klog.KRef(c.rid.Namespace, c.rid.Name), "agent", name)
			if err := sc.meter.quota.bookAlone(context.WithoutCancel(ctx)); err != nil {
				c.r.Log.Error(err, "Booking a failed summary's spend", "agentRun", klog.KRef(c.rid.Namespace, c.rid.Name))
			}
			return nil, nil
		}
		body.Summary, body.Tokens, body.InputTokens, body.Cost, body.Currency = sessions.Summary(res.Output), res.Tokens, res.InputTokens, res.Cost, res.Currency
		use = &summaryUse{tokens: res.Tokens, input: res.InputTokens, cost: cost.Amount(res.Cost), currency: res.Currency}
	}
	rec := body.Record(c.rid, c.r.Clock.Now())
	rec.Spend = sc.meter.quota.Take()
	stored, err := c.r.Store.Append(ctx, rec)
	if err != nil {
		sc.meter.quota.Done(rec.Spend, false)
		_ = sc.meter.quota.bookAlone(context.WithoutCancel(ctx))
		c.r.Log.Error(err, "Recording a session's summary; the turn goes on without it", "agentRun", klog.KRef(c.rid.Namespace, c.rid.Name))
		return use, nil
	}
	c.r.booked(types.NamespacedName{Namespace: c.rid.Namespace, Name: c.rid.Name}, rec.Spend, stored[0].Spend)
	if use != nil {
		// The step's own calls are held to what is left of the run's budget after it.
		c.meter.spent = c.meter.spent.Add(use.cost)
	}
	return use, nil
}

// toFold is the turn's history record when it names turns to summarize and no summary of them
// was recorded yet.
func (c *stepCall) toFold(ctx context.Context) (records.HistoryBody, bool) {
	rec, found, err := c.r.Store.Get(ctx, c.rid.UID, records.HistoryKey)
	if err != nil || !found {
		return records.HistoryBody{}, false
	}
	h, err := records.HistoryOf(rec)
	if err != nil || len(h.Fold) == 0 {
		return h, false
	}
	if _, made, err := c.r.Store.Get(ctx, c.rid.UID, records.SummaryKey); err != nil || made {
		return h, false
	}
	return h, true
}

// summaryCall asks the summarizer for the new summary, metered as the step's own calls are.
func (c *stepCall) summaryCall(ctx context.Context, h records.HistoryBody) (workflow.Result, error) {
	if c.resolveErr != nil {
		return workflow.Result{}, c.resolveErr
	}
	req := agents.NewRequest(c.plan, agents.RunRef{Namespace: c.rid.Namespace, Name: c.rid.Name, UID: c.rid.UID}, "", c.step)
	req.Task, req.Input = sessions.SummaryTask(h.Summary, h.Fold)
	req.Reason = "to keep the session's summary"
	req.Peers, req.Children, req.Signals, req.Context = nil, nil, nil, nil
	req.Agent.Parallel, req.Agent.OutputSchema = nil, nil
	if c.endpoint != nil {
		m := &req.Agent.Model
		m.Provider, m.Endpoint, m.APIKeySecretRef, m.EndpointRef = c.endpoint.Provider, c.endpoint.URL, c.endpoint.Secret, nil
		req.SecretNamespace = c.endpoint.SecretNamespace
		c.meter.capOutput(&req.Agent.Model)
	}
	c.meter.prompt = promptOf(req)
	req.ModelCalls = c.meter
	agent, err := c.r.Providers.For(req.Agent.Model.Provider)
	if err != nil {
		return workflow.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, summaryTimeout)
	defer cancel()
	var answer *workflow.Result
	if converses(req.Agent.Model.Provider) {
		answer, err = agent.Step(ctx, req)
	} else {
		answer, err = agents.Metered(ctx, req.ModelCalls, func(ctx context.Context) (*workflow.Result, error) { return agent.Step(ctx, req) })
	}
	if err == nil && (answer == nil || answer.Output == "") {
		err = errors.New("the summarizer answered nothing")
	}
	if err != nil {
		return workflow.Result{}, err
	}
	c.meter.result(answer)
	return *answer, nil
}

// summaryTimeout bounds a summary call; the step's own deadline bounds it too.
const summaryTimeout = 2 * time.Minute
