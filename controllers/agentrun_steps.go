package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/workflow"
	"github.com/baton-dev/baton/transcript"
)

// stepWork is the work of one step, done in the step's goroutine (runs.go): read what the agent
// sees of the run's earlier steps from the transcript, ask the agent's provider, and make the
// record of its answer, with what the answer adds to later agents' context.
//
// A step may wait in line for a slot a long time, so what it keeps until it starts is small: the
// run's identity, its input and the status it started from. The request is made when the step
// runs.
func (r *AgentRunReconciler) stepWork(plan *workflow.Plan, run *v1alpha1.AgentRun, step workflow.Step) stepWork {
	spec := plan.Agent(step.Agent)
	rid := runID{uid: string(run.UID), namespace: run.Namespace, name: run.Name}
	id := rid.object()
	task := run.Spec.Input
	// The status the step started from: Apply decides from it what the step adds to the context.
	from := *run.Status.DeepCopy()
	provider, config := spec.Model.Provider, run.Spec.ConfigRef.Name
	traced := runOf(id, config)
	// sent is the request as the agent got it, for the record; the call may outlive its deadline.
	var mu sync.Mutex
	var sent *agents.Request
	var box *toolbox

	call := func(ctx context.Context) (res workflow.StepResult) {
		res = workflow.StepResult{Agent: step.Agent, Input: step.Input}
		req := r.stepRequest(plan, rid, task, &from, step)
		ctx, span := startStep(ctx, traced, step.Number, spec)
		defer func() { endStep(span, req, res.Result, res.Error, res.TimedOut, r.options.TraceContent) }()
		if err := r.fromTranscript(ctx, plan, step, &req); err != nil {
			res.Error = err.Error()
			return res
		}
		if len(spec.Tools) > 0 {
			b, err := r.newToolbox(ctx, plan, id, config, step, &from)
			if err != nil {
				res.Error = err.Error()
				return res
			}
			req.Tools = b
			mu.Lock()
			box = b
			mu.Unlock()
		}
		req.ModelCalls = chatCalls{run: traced, agent: spec, req: req, content: r.options.TraceContent}
		mu.Lock()
		sent = &req
		mu.Unlock()
		agent, err := r.Providers.For(provider)
		if err == nil {
			res.Result, err = agent.Step(ctx, req)
		}
		result := "ok"
		switch {
		case err == nil:
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			res.Error, res.TimedOut, result = fmt.Sprintf("timed out after %s", step.Timeout), true, "timeout"
		default:
			res.Error, result = err.Error(), "error"
		}
		stepsTotal.WithLabelValues(id.Namespace, config, step.Agent, string(provider), result).Inc()
		// A continuation joins the pieces: providers return only the new text.
		if step.Continues && res.Error == "" {
			res.Output = req.Continuation + res.Output
		}
		return res
	}
	record := func(res workflow.StepResult, started, ended time.Time) transcript.Record {
		mu.Lock()
		req, b := sent, box
		mu.Unlock()
		if req == nil {
			// The step ended before it sent anything.
			built := r.stepRequest(plan, rid, task, &from, step)
			req = &built
		}
		// What the status counts of the step is counted here, once, for the answer the step
		// ends with (an answer that came after the deadline is not).
		countTokens(rid.namespace, config, spec, res.Result)
		if res.Held != nil {
			return heldRecord(rid, step.Number, res, ended)
		}
		var unavailable []string
		var toolBytes int64
		if b != nil {
			// A step cut short at its deadline may still be calling: the next step counts the
			// run's calls from the transcript instead.
			uses := b.uses
			if res.Error != "" {
				uses = nil
			}
			unavailable, toolBytes = b.unavailable, b.bytes.Load()
			r.runs.setToolUses(id, uses, step.Number+1)
		}
		d := workflow.Apply(plan, from, res, ended)
		rec := stepRecord(id, step, spec, req, res, d.Context, unavailable, previous(from, step.Number), started, ended, toolBytes)
		if len(rec.Body) <= transcript.MaxBody {
			return rec
		}
		// A record the store cannot take fails its step now, saying so, rather than be tried
		// again until the run's timeout: the failure is what is recorded, without the messages.
		res = tooLarge(res, len(rec.Body))
		d = workflow.Apply(plan, from, res, ended)
		return stepRecord(id, step, spec, nil, res, d.Context, unavailable, previous(from, step.Number), started, ended, toolBytes)
	}
	return stepWork{call: call, record: record, provider: string(provider)}
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
func (r *AgentRunReconciler) stepRequest(plan *workflow.Plan, rid runID, task string, from *v1alpha1.AgentRunStatus, step workflow.Step) agents.Request {
	spec := plan.Agent(step.Agent)
	req := agents.Request{
		Namespace: rid.namespace,
		Run:       rid.name,
		RunUID:    rid.uid,
		Step:      step.Number,
		Turn:      step.Turn,
		Attempt:   step.Attempt,
		Agent:     *spec,
		Task:      task,
		Input:     step.Input,
		Reason:    step.Reason,
		Signals:   plan.Spec.Signals,
		Left:      step.Left,
	}
	if deadline, ok := workflow.Deadline(plan, from); ok {
		req.Left.Seconds = int64(deadline.Sub(r.Clock.Now()).Seconds())
	}
	for _, h := range spec.Handoffs {
		if peer := plan.Agent(h); peer != nil {
			req.Peers = append(req.Peers, agents.Peer{Name: peer.Name, Description: peer.Description})
		}
	}
	if plan.Mode() == v1alpha1.ModeSupervisor && step.Agent == plan.Spec.Routing.Supervisor {
		for _, c := range plan.Children() {
			req.Children = append(req.Children, agents.Peer{Name: c.Name, Description: c.Description})
		}
	}
	return req
}

// recordedStep looks in the transcript for the run's next step, the first time this process
// takes a step of the run: the step may have ended in an operator that stopped before it wrote
// the status. Then it becomes the run's ended flight and is applied from its record, without
// calling the agent again.
func (r *AgentRunReconciler) recordedStep(ctx context.Context, run *v1alpha1.AgentRun, step workflow.Step) (flightState, workflow.StepResult, error) {
	rec, found, err := r.transcript.Get(ctx, string(run.UID), transcript.Key{Kind: transcript.KindStep, Step: step.Number})
	if err != nil {
		return notStarted, workflow.StepResult{}, fmt.Errorf("reading step %d from the transcript: %w", step.Number, err)
	}
	if !found {
		// Steps from here on are this process's own. Until then, each may have been recorded
		// by an operator that stopped before writing it (statuses are written in batches).
		r.runs.looked(run)
		return notStarted, workflow.StepResult{}, nil
	}
	res, err := stepResultOf(rec)
	if err != nil {
		res = workflow.StepResult{Agent: step.Agent, Input: step.Input, Error: err.Error()}
	}
	log.FromContext(ctx).V(2).Info("Applying a step recorded before a restart", "agentRun", klog.KObj(run), "step", step.Number)
	stepsFromTranscript.Inc()
	r.steps.adopt(run, step, res)
	return ended, res, nil
}

// fromTranscript gives the request what the agent sees of the run's earlier steps: the context
// window within the config's budget, in full, and for a continuation or a repair the answer it
// works on.
func (r *AgentRunReconciler) fromTranscript(ctx context.Context, plan *workflow.Plan, step workflow.Step, req *agents.Request) error {
	maxMessages, maxChars := plan.ContextBudget()
	// A Scripted agent plays its script whatever came before: it needs no window.
	if maxMessages > 0 && !scripted(&req.Agent) {
		// A page of the newest records: the window is bounded in characters far below it.
		recs, err := r.transcript.List(ctx, transcript.Query{RunUID: req.RunUID, Limit: maxMessages, Newest: true,
			Kinds: []transcript.Kind{transcript.KindStep, transcript.KindDecision}, MaxBytes: readPage})
		if err != nil {
			return fmt.Errorf("reading the run's transcript: %w", err)
		}
		var entries []agents.ContextEntry
		for _, rec := range recs {
			entries = append(entries, contextOf(rec)...)
		}
		req.Context = window(entries, maxMessages, maxChars)
	}
	if !step.Continues && !step.Repairs {
		return nil
	}
	prev, found, err := r.transcript.Get(ctx, req.RunUID, transcript.Key{Kind: transcript.KindStep, Step: step.Number - 1})
	if err != nil || !found {
		return fmt.Errorf("reading step %d from the run's transcript: found %t, %v", step.Number-1, found, err)
	}
	var body stepBody
	if err := json.Unmarshal(prev.Body, &body); err != nil {
		return fmt.Errorf("reading step %d from the run's transcript: %w", step.Number-1, err)
	}
	if step.Continues {
		req.Continuation = body.Output
		return nil
	}
	req.Repair = &agents.Repair{Output: body.Output}
	for _, c := range body.Context {
		if c.Kind == agents.ContextInvalid {
			req.Repair.Errors = c.Text
		}
	}
	return nil
}

// window keeps the newest entries: at most maxMessages, and at most maxChars characters in
// all. The newest entry is cut to fit when it alone is longer; older ones are kept whole or not
// at all.
func window(entries []agents.ContextEntry, maxMessages, maxChars int) []agents.ContextEntry {
	if over := len(entries) - maxMessages; over > 0 {
		entries = entries[over:]
	}
	chars := 0
	first := len(entries)
	for i := len(entries) - 1; i >= 0; i-- {
		n := len([]rune(entries[i].Text))
		if chars+n > maxChars {
			if i == len(entries)-1 && maxChars > 0 {
				entries[i].Text = string([]rune(entries[i].Text)[:maxChars-1]) + "…"
				first = i
			}
			break
		}
		chars += n
		first = i
	}
	return entries[first:]
}
