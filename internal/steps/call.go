package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/pacing"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/toolbox"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// stepCall is the work of one step, done in the step's goroutine: read what the agent
// sees of the run's earlier steps from the transcript, ask the agent's provider, and make the
// record of its answer, with what the answer adds to later agents' context.
//
// A step may wait in line for a slot a long time, and on its agent longer, so what it keeps is
// small and in one object: the run's identity, its input and the status it started from. The
// request is made when the step runs, once, and the agent is handed a pointer to it.
type stepCall struct {
	r    *Runner
	plan *workflow.Plan
	spec *v1alpha1.Agent
	step workflow.Step
	rid  records.RunID
	// task is the run's input, config the name of its AgentConfig.
	task, config string
	// from is the status the step started from: the core decides from it what the step adds
	// to the context, which the step's record keeps.
	from v1alpha1.AgentRunStatus

	// endpoint is the agent's model endpoint, when it names one (and resolveErr why it could
	// not be had); paced is its pacer's line, capacity what the step asks of it, meter what the
	// step's calls used.
	endpoint   *endpoints.Endpoint
	resolveErr error
	paced      *pacing.Endpoint
	capacity   pacing.Ask
	meter      *meter

	// turn marks a step of a session's turn: its first summarizes the turns that left the
	// window, and summary is what that used, which the step's result counts.
	turn    bool
	summary *summaryUse

	// sent is the request as the agent got it, and box the step's toolbox, for the record; the
	// call may outlive its deadline.
	mu   sync.Mutex
	sent *agents.Request
	box  *toolbox.Box
	// guard are the guardrails' verdicts on the step's input and output, for its record.
	guard []records.GuardVerdict
	// heldBytes is what the step's tool and gate records take, when it went on from an output
	// that waited at a guardrail's gate (it has no toolbox then).
	heldBytes int64
}

// Start starts the run's step: in a goroutine of its own once it has a slot, with the step's
// deadline, it calls the agent, records the answer in the transcript, and wakes the run. The
// run's status is the one the step starts from.
func (s *Runner) Start(run *v1alpha1.AgentRun, plan *workflow.Plan, step workflow.Step) {
	c := s.newCall(records.RunID{UID: string(run.UID), Namespace: run.Namespace, Name: run.Name}, plan, plan.Agent(step.Agent), step,
		run.Spec.Input, run.Spec.ConfigRef.Name, *run.Status.DeepCopy())
	c.turn = run.Spec.Session != nil
	s.start(run, step, c)
}

// newCall readies a call of agent spec for the run's step, metered: held to its namespace's
// caps, and paced and priced on its model endpoint, if it names one.
func (s *Runner) newCall(rid records.RunID, plan *workflow.Plan, spec *v1alpha1.Agent, step workflow.Step, task, config string, from v1alpha1.AgentRunStatus) *stepCall {
	c := &stepCall{r: s, plan: plan, spec: spec, step: step, rid: rid, task: task, config: config, from: from}
	c.meter = &meter{prompt: c.promptTokens(), free: scripted(c.spec) && c.spec.Model.EndpointRef == nil, quota: quotaMeter{ledger: s.Ledger, namespace: rid.Namespace, clock: s.Clock,
		held: s.holding(types.NamespacedName{Namespace: rid.Namespace, Name: rid.Name}, types.UID(rid.UID))}}
	if s.Quotas != nil {
		c.meter.quota.caps, c.resolveErr = s.Quotas(context.Background(), rid.Namespace)
	}
	if ref := c.spec.Model.EndpointRef; ref != nil && c.resolveErr == nil {
		c.onEndpoint(ref)
	}
	return c
}

// onEndpoint readies a step whose agent names a model endpoint: resolved from the cache, and
// paced with every other step on it. An endpoint that cannot be had fails the step, saying why.
func (c *stepCall) onEndpoint(ref *v1alpha1.EndpointReference) {
	if c.r.Endpoints == nil || c.r.Pacer == nil {
		c.resolveErr = fmt.Errorf("model endpoint references are not available in this operator")
		return
	}
	ns := c.rid.Namespace
	c.endpoint, c.resolveErr = c.r.Endpoints.Resolve(context.Background(), ns, ref)
	if c.resolveErr != nil {
		return
	}
	c.paced = c.r.Pacer.Endpoint(c.endpoint.Key, c.endpoint.Limits)
	c.meter.onEndpoint(c.endpoint, c.paced, c.spec.Model, workflow.Spent(&c.from), c.plan.Limits)
	if c.step.WrapUp == nil {
		c.meter.reserve = c.wrapUpReserve(ns)
	}
	c.capacity = pacing.Ask{Namespace: ns, Run: ns + "/" + c.rid.Name, Tokens: c.meter.prompt + c.meter.outputCap}
	c.meter.ask = c.capacity
}

// wrapUpReserve is what the run keeps back for its wrap-up agent's turn, when it has one on a
// priced model endpoint.
func (c *stepCall) wrapUpReserve(namespace string) wrapUpReserve {
	name := c.plan.WrapUpAgent()
	if name == "" {
		return wrapUpReserve{}
	}
	model := c.plan.Agent(name).Model
	if model.EndpointRef == nil {
		return wrapUpReserve{}
	}
	e, err := c.r.Endpoints.Resolve(context.Background(), namespace, model.EndpointRef)
	if err != nil {
		return wrapUpReserve{} // its turn fails for it, saying why
	}
	price, ok := e.Prices.For(model.Name)
	if !ok {
		return wrapUpReserve{}
	}
	spec := c.plan.Agent(name)
	r := wrapUpReserve{agent: name, price: price, output: defaultWrapUpOutput,
		prompt: cost.EstimateTokens(int64(len(spec.Instructions)+len(spec.Description)+512), 2)}
	if model.MaxOutputTokens != nil {
		r.output = int64(*model.MaxOutputTokens)
	}
	return r
}

// promptTokens estimates the prompt of the step's first call, for its place in the endpoint's
// line, from what the status holds: the run's input, the step's input, the agent's
// instructions, and a little for the rest. The context window, read from the transcript once
// the step runs, is not known yet: the tokens the call used settle the difference, and the
// budget check is made on the prompt as it is sent.
func (c *stepCall) promptTokens() int64 {
	bytes := int64(len(c.task) + len(c.step.Input) + len(c.spec.Instructions) + len(c.spec.Description) + 1024)
	return cost.EstimateTokens(bytes, 4)
}

// promptOf estimates the tokens of a request's prompt as it is sent.
func promptOf(req *agents.Request) int64 {
	msgs := agents.Messages(*req)
	var bytes int64
	for _, m := range msgs {
		bytes += int64(len(m.Content))
	}
	return cost.EstimateTokens(bytes, len(msgs))
}

func (c *stepCall) pace() paced {
	if c.endpoint == nil {
		return paced{}
	}
	return paced{endpoint: c.paced, key: c.endpoint.Key, ask: c.capacity, meter: c.meter}
}

// again readies a step whose first call was turned away to be made again from the start.
func (c *stepCall) again() {
	c.mu.Lock()
	b := c.box
	c.sent, c.box = nil, nil
	c.mu.Unlock()
	if b != nil {
		c.r.Toolboxes.Done(b, true)
	}
	c.meter.reset()
}

func (c *stepCall) provider() string {
	if c.endpoint != nil {
		return string(c.endpoint.Provider)
	}
	return string(c.spec.Model.Provider)
}

// call makes the step's request and asks the agent's provider, in the step's span. The step's
// goroutine waits on the agent below this frame: what it keeps for the step is in c.
func (c *stepCall) call(ctx context.Context) *workflow.StepResult {
	ctx, span := startStep(ctx, tracedRun(c.rid, c.config), c.step.Number, c.spec)
	res, req := c.answer(ctx, span != noSpan)
	endStep(span, req, &res.Result, res.Error, res.TimedOut, c.r.TraceContent && req != nil)
	return res
}

// answer is the step's answer, and the request it answered when one was made: the agent's,
// screened by the guardrails, or the one a guardrail's gate held, once people decided there.
func (c *stepCall) answer(ctx context.Context, traced bool) (*workflow.StepResult, *agents.Request) {
	if res, err := c.heldOutput(ctx); err != nil || res != nil {
		if err != nil {
			res = &workflow.StepResult{Agent: c.step.Agent, Input: c.step.Input, Error: err.Error()}
		}
		return res, nil
	}
	req, err := c.request(ctx, traced)
	var held *workflow.Held
	switch {
	case errors.As(err, &held):
		return &workflow.StepResult{Agent: c.step.Agent, Input: c.step.Input, Result: workflow.Result{Held: held}}, req
	case err != nil:
		return &workflow.StepResult{Agent: c.step.Agent, Input: c.step.Input, Error: err.Error()}, req
	}
	res := c.ask(ctx, req)
	c.mu.Lock()
	if b := c.box; b != nil && res.Taint == nil {
		// What the step's tools brought into its context: the run is tainted from here.
		res.Taint = b.Taint()
	}
	c.mu.Unlock()
	c.screenOutput(ctx, res, c.outputCall())
	return res, req
}

// request is what the step's agent is asked: what the run's status says, what the transcript
// adds, and the step's toolbox; traced, each of its model calls gets a span. The request is
// whole only without an error.
func (c *stepCall) request(ctx context.Context, traced bool) (*agents.Request, error) {
	req := c.r.stepRequest(c.plan, c.rid, c.task, &c.from, c.step)
	if c.resolveErr != nil {
		return req, c.resolveErr
	}
	// Before the summary: an input held for review has made no model call yet.
	if err := c.screenInput(ctx, req); err != nil {
		return req, err
	}
	if c.turn && c.step.Number == 1 && c.step.Attempt == 0 && !c.step.Continues && !c.step.Repairs {
		use, err := c.summarize(ctx)
		if err != nil {
			return req, err
		}
		c.summary = use
	}
	if err := c.r.fromTranscript(ctx, c.plan, c.step, req); err != nil {
		return req, err
	}
	if c.spec.Model.Provider == v1alpha1.ProviderA2A {
		task, err := c.r.remoteTask(ctx, c.rid, &c.from, c.step)
		if err != nil {
			return req, fmt.Errorf("reading step %d from the run's transcript: %w", c.step.Number-1, err)
		}
		req.RemoteTask = task
		req.Updates = &updates{store: c.r.Store, rid: c.rid, step: c.step.Number, agent: c.step.Agent, screen: c.screenUpdate()}
	}
	if len(c.spec.Tools) > 0 && c.step.WrapUp == nil {
		b, err := c.r.Toolboxes.New(ctx, c.plan, c.rid, c.config, c.step, &c.from)
		if err != nil {
			return req, err
		}
		b.Spend = &c.meter.quota
		req.Tools = b
		c.mu.Lock()
		c.box = b
		c.mu.Unlock()
	}
	if traced {
		req.ModelCalls = chatCalls{run: tracedRun(c.rid, c.config), agent: c.spec, req: req, content: c.r.TraceContent}
	}
	if c.endpoint != nil {
		m := &req.Agent.Model
		m.Provider, m.Endpoint, m.APIKeySecretRef, m.EndpointRef = c.endpoint.Provider, c.endpoint.URL, c.endpoint.Secret, nil
		req.SecretNamespace = c.endpoint.SecretNamespace
	}
	if !scripted(&req.Agent) {
		c.meter.prompt = promptOf(req)
		if m := req.Agent.Model.MaxOutputTokens; m != nil && c.meter.outputCap == 0 {
			c.meter.outputCap = int64(*m)
		}
	}
	if c.endpoint != nil {
		c.meter.capOutput(&req.Agent.Model)
	}
	if converses(req.Agent.Model.Provider) {
		c.meter.next = req.ModelCalls
	}
	req.ModelCalls = c.meter
	c.mu.Lock()
	c.sent = req
	c.mu.Unlock()
	return req, nil
}

// ask asks the agent's provider, and says what it answered or why it did not.
func (c *stepCall) ask(ctx context.Context, req *agents.Request) *workflow.StepResult {
	agent, err := c.r.Providers.For(req.Agent.Model.Provider)
	var answer *workflow.Result
	switch {
	case err != nil:
	case converses(req.Agent.Model.Provider):
		answer, err = agent.Step(ctx, req)
	default:
		// A provider that makes one call of its own for the step is metered as one model call.
		answer, err = agents.Metered(ctx, req.ModelCalls, func(ctx context.Context) (*workflow.Result, error) { return agent.Step(ctx, req) })
	}
	res := &workflow.StepResult{Agent: c.step.Agent, Input: c.step.Input}
	if answer != nil {
		res.Result = *answer
	}
	if c.meter != nil {
		c.meter.result(&res.Result)
	}
	c.summary.addTo(&res.Result)
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Error, res.TimedOut, result = fmt.Sprintf("timed out after %s", c.step.Timeout), true, "timeout"
	default:
		res.Error, result = err.Error(), "error"
	}
	metrics.StepsTotal.WithLabelValues(c.rid.Namespace, c.config, c.step.Agent, c.provider(), result).Inc()
	// A continuation joins the pieces: providers return only the new text.
	if c.step.Continues && res.Error == "" {
		res.Output = req.Continuation + res.Output
	}
	return res
}

func (c *stepCall) spend() *quotaMeter { return &c.meter.quota }

// record is the transcript record of the step's answer, carrying what its calls used that no
// record booked yet. A step held at its namespace's cap records nothing.
func (c *stepCall) record(answer *workflow.StepResult, started, ended time.Time) transcript.Record {
	rec := c.recordOf(answer, started, ended)
	rec.Spend = c.meter.quota.Take()
	return rec
}

func (c *stepCall) recordOf(answer *workflow.StepResult, started, ended time.Time) transcript.Record {
	res := *answer
	c.mu.Lock()
	req, b := c.sent, c.box
	c.mu.Unlock()
	if res.QuotaHold != nil {
		if b != nil {
			c.r.Toolboxes.Done(b, true)
		}
		return transcript.Record{}
	}
	if req == nil {
		// The step ended before it sent anything.
		req = c.r.stepRequest(c.plan, c.rid, c.task, &c.from, c.step)
	}
	// What the status counts of the step is counted here, once, for the answer the step
	// ends with (an answer that came after the deadline is not).
	metrics.CountTokens(c.rid.Namespace, c.config, c.spec, res.Result)
	if res.Held != nil {
		return heldRecord(c.plan, c.rid, c.step.Number, res, ended)
	}
	var unavailable []string
	var toolBytes int64
	if b != nil {
		// A step cut short at its deadline may still be calling: the next step counts the
		// run's calls from the transcript instead.
		c.r.Toolboxes.Done(b, res.Error != "")
		unavailable, toolBytes = b.Unavailable(), b.RecordBytes()
	} else {
		toolBytes = c.heldBytes
	}
	prev := previous(c.from, c.step.Number)
	extra := stepExtra{unavailable: unavailable, previous: prev, toolBytes: toolBytes, guard: c.verdicts()}
	rec := stepRecord(c.rid, c.step, c.spec, req, res, workflow.Context(c.plan, &c.from, res), extra, started, ended)
	if len(rec.Body) <= transcript.MaxBody {
		return rec
	}
	// A record the store cannot take fails its step now, saying so, rather than be tried
	// again until the run's timeout: the failure is what is recorded, without the messages.
	res = tooLarge(res, len(rec.Body))
	return stepRecord(c.rid, c.step, c.spec, nil, res, workflow.Context(c.plan, &c.from, res), extra, started, ended)
}

// heldRecord is the gate record of a step held at a call or at a guardrail's gate: an output
// that waits there is kept whole, with the answer it came in.
func heldRecord(plan *workflow.Plan, run records.RunID, step int32, res workflow.StepResult, ended time.Time) transcript.Record {
	body := records.NewHeld(res)
	var order int32
	if g := res.Held.Guard; g != nil {
		order = int32(slices.IndexFunc(plan.Spec.Guardrails, func(r v1alpha1.Guardrail) bool { return r.Name == g.Guardrail })) + 1
		if g.Stage == v1alpha1.StageOutput {
			answer := res.Result
			answer.Held = nil
			body.Answer = &answer
		}
	}
	return body.Record(run, step, order, ended)
}

// stepExtra is what a step's record keeps beside its result: the tool servers that could not be
// listed, the handoff before it, what its tool records take, the guardrails' verdicts.
type stepExtra struct {
	unavailable []string
	previous    *v1alpha1.HandoffRecord
	toolBytes   int64
	guard       []records.GuardVerdict
}

// stepRecord is the transcript record of a step that ended. Without req, the record holds no
// messages.
func stepRecord(run records.RunID, step workflow.Step, spec *v1alpha1.Agent, req *agents.Request,
	res workflow.StepResult, context []workflow.ContextEntry, extra stepExtra, started, ended time.Time) transcript.Record {
	body := records.NewStep(res, spec, context, started, ended)
	body.Previous, body.UnavailableTools, body.ToolRecordBytes, body.Guard = extra.previous, extra.unavailable, extra.toolBytes, extra.guard
	if req != nil && !scripted(&req.Agent) {
		body.Messages = agents.Messages(*req)
	}
	return body.Record(run, step.Number, ended)
}

// tooLarge is a step whose record would take size bytes, more than the transcript takes: it
// failed, and what it used counts.
func tooLarge(res workflow.StepResult, size int) workflow.StepResult {
	failed := workflow.StepResult{Agent: res.Agent, Input: res.Input}
	failed.Tokens, failed.InputTokens, failed.CountedTokens, failed.CountedInputTokens = res.Tokens, res.InputTokens, res.CountedTokens, res.CountedInputTokens
	failed.ToolCalls, failed.CountedToolCalls = res.ToolCalls, res.CountedToolCalls
	failed.Error = fmt.Sprintf("the step's transcript record would take %d bytes, more than the %d a record may hold: its input, the messages the model was sent (spec.context bounds them) and its output together are too large",
		size, transcript.MaxBody)
	return failed
}

// stepRequest is what the step's agent is asked, but for what the transcript adds.
func (s *Runner) stepRequest(plan *workflow.Plan, rid records.RunID, task string, from *v1alpha1.AgentRunStatus, step workflow.Step) *agents.Request {
	req := agents.NewRequest(plan, agents.RunRef{Namespace: rid.Namespace, Name: rid.Name, UID: rid.UID}, task, step)
	if deadline, ok := workflow.Deadline(plan, from); ok {
		req.Left.Seconds = int64(deadline.Sub(s.Clock.Now()).Seconds())
	}
	return req
}

// recorded looks in the transcript for the run's next step, until this process has started a
// step of the run: the step may have ended in an operator that stopped before it wrote the
// status. Then it becomes the run's ended flight and is applied from its record, without
// calling the agent again.
func (s *Runner) recorded(ctx context.Context, run *v1alpha1.AgentRun, step workflow.Step) (State, workflow.StepResult, error) {
	rec, found, err := s.Store.Get(ctx, string(run.UID), transcript.Key{Kind: transcript.KindStep, Step: step.Number})
	if err != nil {
		return NotStarted, workflow.StepResult{}, fmt.Errorf("reading step %d from the transcript: %w", step.Number, err)
	}
	if !found {
		// Steps from here on are this process's own. Until then, each may have been recorded
		// by an operator that stopped before writing it (statuses are written in batches).
		s.with(run, func(r *runSteps) { r.checked = true })
		return NotStarted, workflow.StepResult{}, nil
	}
	res, err := records.ResultOf(rec)
	if err != nil {
		res = workflow.StepResult{Agent: step.Agent, Input: step.Input, Error: err.Error()}
	}
	log.FromContext(ctx).V(2).Info("Applying a step recorded before a restart", "agentRun", klog.KObj(run), "step", step.Number)
	metrics.StepsFromTranscript.Inc()
	s.with(run, func(r *runSteps) { r.flight = &flight{step: step, done: true, result: &res} })
	return Ended, res, nil
}

// fromTranscript gives the request what the agent sees of the run's earlier steps, after a
// turn's history of its session's earlier turns: the context window within the config's budget,
// in full, and for a continuation or a repair the answer it
// works on.
func (s *Runner) fromTranscript(ctx context.Context, plan *workflow.Plan, step workflow.Step, req *agents.Request) error {
	maxMessages, maxChars := plan.ContextBudget()
	// A Scripted agent plays its script whatever came before: it needs no window.
	if maxMessages > 0 && !scripted(&req.Agent) {
		// A page of the newest records: the window is bounded in characters far below it.
		recs, err := s.Store.List(ctx, transcript.Query{RunUID: req.RunUID, Limit: maxMessages, Newest: true,
			Kinds: []transcript.Kind{transcript.KindHistory, transcript.KindSummary, transcript.KindStep, transcript.KindDecision}, MaxBytes: records.ReadPage})
		if err != nil {
			return fmt.Errorf("reading the run's transcript: %w", err)
		}
		var entries []workflow.ContextEntry
		summary := ""
		for _, rec := range recs {
			if rec.Kind == transcript.KindSummary {
				if b, err := records.SummaryOf(rec); err == nil {
					summary = b.Summary
				}
				continue
			}
			entries = append(entries, records.ContextOf(rec)...)
		}
		if summary != "" {
			entries = records.WithSummary(entries, summary)
		}
		req.Context = workflow.Window(entries, maxMessages, maxChars)
	}
	if !step.Continues && !step.Repairs {
		return nil
	}
	prev, found, err := s.Store.Get(ctx, req.RunUID, transcript.Key{Kind: transcript.KindStep, Step: step.Number - 1})
	if err != nil {
		return fmt.Errorf("reading step %d from the run's transcript: %w", step.Number-1, err)
	}
	if !found {
		return fmt.Errorf("reading step %d from the run's transcript: it is not there", step.Number-1)
	}
	var body records.StepBody
	if err := json.Unmarshal(prev.Body, &body); err != nil {
		return fmt.Errorf("reading step %d from the run's transcript: %w", step.Number-1, err)
	}
	if step.Continues {
		req.Continuation = body.Output
		return nil
	}
	req.Repair = &agents.Repair{Output: body.Output}
	for _, c := range body.Context {
		if c.Kind == workflow.ContextInvalid {
			req.Repair.Errors = c.Text
		}
	}
	return nil
}

// converses reports whether the provider's steps go through agents.Converse, which tells
// ModelCalls of each model call itself; the others make one call of their own per step.
func converses(p v1alpha1.ModelProvider) bool {
	return p != v1alpha1.ProviderHTTP && p != v1alpha1.ProviderA2A
}

// scripted reports whether the agent plays a script: it is sent no messages and reads no
// context.
func scripted(a *v1alpha1.Agent) bool {
	return a.Model.Provider == v1alpha1.ProviderScripted || a.Model.Provider == ""
}

// previous is the handoff record of the step before step, as the run had it when step
// started; nil when the status does not hold it.
func previous(from v1alpha1.AgentRunStatus, step int32) *v1alpha1.HandoffRecord {
	n := len(from.HandoffSequence)
	if n == 0 || from.HandoffSequence[n-1].Step != step-1 {
		return nil
	}
	last := from.HandoffSequence[n-1]
	return &last
}
