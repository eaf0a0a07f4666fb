// Package toolbox is what an agent step calls its tools with: a step's Box offers the agent's
// tools, records every turn and call in the transcript, checks the run's guards before each
// call, holds calls at their gates and never sends a call of a tool with side effects twice. The
// clients of the tool servers themselves are package tools'.
package toolbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// Clients hands out the client of a config's tool server (tools.Pool).
type Clients interface {
	Client(ctx context.Context, namespace string, server v1alpha1.ToolServer, headers map[string]string) (tools.Client, error)
}

// Bounds of what a model may ask of a tool.
const (
	maxTurnTextBytes = 64 << 10
	maxCallIDBytes   = 128
)

// Box is one step's agents.Toolbox: it offers the agent's tools, records every turn and
// call in the transcript, checks the run's guards before each call, holds calls at their gates,
// and never sends a call of a tool with side effects twice. It lives in the step's goroutine.
type Box struct {
	plan   *workflow.Plan
	run    records.RunID
	config string
	// content puts tool arguments and results on the calls' spans (Options.TraceContent).
	content bool
	step    int32
	agent   string
	clients Clients
	headers func(ctx context.Context, namespace, name string) (map[string]string, error)
	store   transcript.Store
	log     logr.Logger
	// statusCalls and approvals are the run's status when the step started.
	statusCalls int32
	approvals   []v1alpha1.ApprovalRecord

	// uses counts the run's calls, this step's included, for the repeated-call detector.
	uses     *workflow.ToolUses
	progress agents.Progress
	// made counts the step's calls sent to their tools; turns and calls number the step's.
	made, turns, calls int32
	// unavailable names the servers whose tools could not be listed.
	unavailable []string
	// offered are the "server/tool" names the step offered the model: the only tool names
	// metrics carry.
	offered map[string]bool
	// bytes is what the step's tool records take in the transcript.
	bytes atomic.Int64
	// Spend, when set, is what the step's model calls used: each turn's record books it.
	Spend Spend
	// guardrails asks the config's guardrails about the calls' results.
	guardrails *guardrails.Client

	// taint is where untrusted content first came into the step's context: the run's taint
	// when the step started, or the first result of an Untrusted tool server since. Calls are
	// sent at once, so it is guarded.
	mu    sync.Mutex
	taint *v1alpha1.Taint
	// verdicts are the guardrails' on results that waited at their gates (reviewed).
	verdicts []records.GuardVerdict
}

var _ agents.Toolbox = (*Box)(nil)

// load reads what the step already did from the transcript, and counts its calls.
func (b *Box) load(ctx context.Context) error {
	p, done, size, err := stepProgress(ctx, b.store, b.run.UID, b.step)
	if err != nil {
		return err
	}
	b.bytes.Store(size)
	b.progress = p
	for _, ex := range p.Exchanges {
		b.turns = max(b.turns, ex.Turn.Number)
		for _, c := range ex.Turn.Calls {
			b.calls = max(b.calls, c.Index)
		}
	}
	for _, c := range done {
		b.uses.Add(workflow.UseOf(b.step, c.ToolCall))
		if c.Made {
			b.made++
			b.tainted(c.Server, c.Tool)
		}
	}
	return b.reviewAll(ctx, done)
}

// Taint is where untrusted content first came into the step's context, if it did: what the
// step's result carries into the run's status.
func (b *Box) Taint() *v1alpha1.Taint {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.taint
}

// tainted takes the taint a result of the server's tool brings, if the server is untrusted and
// the step is not tainted already.
func (b *Box) tainted(server, tool string) {
	if t := b.plan.ToolTaint(server, tool, b.step); t != nil {
		b.mu.Lock()
		if b.taint == nil {
			b.taint = t
		}
		b.mu.Unlock()
	}
}

// LastCall is the number of the step's last call so far: its output comes after it.
func (b *Box) LastCall() int32 { return b.calls }

// Progress is what the step did before this execution of it, read from the transcript.
func (b *Box) Progress() agents.Progress { return b.progress }

// Offered lists the agent's tools. A server that cannot be listed is left out of this step,
// and named in the step's record.
func (b *Box) Offered(ctx context.Context) ([]agents.OfferedTool, error) {
	var out []agents.OfferedTool
	for _, t := range b.plan.Agent(b.agent).Tools {
		client, err := b.client(ctx, t.Server)
		var listed []tools.Tool
		if err == nil {
			listed, err = client.Tools(ctx)
		}
		if err != nil {
			b.unavailable = append(b.unavailable, fmt.Sprintf("%s: %v", t.Server, err))
			b.log.V(1).Info("Tool server not available for this step", "server", t.Server, "error", err.Error())
			continue
		}
		for _, tool := range listed {
			if !b.plan.ToolAllowed(b.agent, t.Server, tool.Name) {
				continue
			}
			out = append(out, agents.OfferedTool{Server: t.Server, Tool: tool.Name, Name: agents.FunctionName(t.Server, tool.Name),
				Description: tool.Description, InputSchema: tool.InputSchema})
			if b.offered == nil {
				b.offered = map[string]bool{}
			}
			b.offered[t.Server+"/"+tool.Name] = true
		}
	}
	return out, nil
}

// client is the tool server's client, with the headers of its Secret.
func (b *Box) client(ctx context.Context, server string) (tools.Client, error) {
	s, ok := b.plan.ToolServer(server)
	if !ok {
		return nil, fmt.Errorf("tool server %s is not in the config", server)
	}
	var ref *v1alpha1.SecretRef
	switch {
	case s.MCP != nil:
		ref = s.MCP.HeadersFrom
	case s.HTTP != nil:
		ref = s.HTTP.HeadersFrom
	}
	var headers map[string]string
	if ref != nil {
		var err error
		if headers, err = b.headers(ctx, b.run.Namespace, ref.Name); err != nil {
			return nil, err
		}
	}
	return b.clients.Client(ctx, b.run.Namespace, s, headers)
}

// Asked numbers a turn's calls and records the turn before any call is made.
func (b *Box) Asked(ctx context.Context, turn *agents.Turn) error {
	b.turns++
	turn.Number = b.turns
	turn.Text = textbound.Stored(strings.ToValidUTF8(turn.Text, "\uFFFD"), maxTurnTextBytes)
	turn.Tokens = max(turn.Tokens, 0)
	for i := range turn.Calls {
		b.calls++
		c := &turn.Calls[i]
		c.Index = b.calls
		c.ID = textbound.Bytes(c.ID, maxCallIDBytes)
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", c.Index)
		}
		if len(c.Arguments) > workflow.MaxToolArgumentsBytes || !json.Valid(c.Arguments) {
			// Kept as a string, so the record stays small and the model sees what it sent.
			quoted, _ := json.Marshal(textbound.Bytes(string(c.Arguments), 256))
			c.Arguments = quoted
		}
	}
	data := transcript.Body(records.TurnBody{Agent: b.agent, Text: turn.Text, Tokens: turn.Tokens, InputTokens: turn.InputTokens, Cost: turn.Cost, Calls: turn.Calls})
	rec := b.run.Record(transcript.Key{Kind: transcript.KindToolTurn, Step: b.step, Call: turn.Number}, time.Now(), data)
	if b.Spend != nil {
		rec.Spend = b.Spend.Take()
	}
	err := b.append(ctx, rec)
	if b.Spend != nil {
		b.Spend.Done(rec.Spend, err == nil)
	}
	return err
}

// Spend is what a step's model calls used that no record has booked yet: the record of the
// turn a call answered books it in the ledger (transcript.Record.Spend).
type Spend interface {
	// Take hands over what is not booked yet.
	Take() []transcript.Spend
	// Done says whether the record that carried spend was stored; what was not is taken again
	// by the next record.
	Done(spend []transcript.Spend, booked bool)
}

// Prepare readies one call: the agent's permissions and the step's limit first, then the run's
// guards, then the call's gate, and for a tool with side effects the mark that it is sent. A
// call that is sent comes back with its Send; the others with their outcome, recorded.
func (b *Box) Prepare(ctx context.Context, call workflow.ToolCall) (agents.Prepared, error) {
	body := records.CallBody{Agent: b.agent, ToolCall: call, Started: time.Now().UTC(), IdempotencyKey: b.idempotencyKey(call)}
	refuse := func(why string) (agents.Prepared, error) {
		body.Refused = why
		body.ToolOutcome = workflow.ToolOutcome{IsError: true, Content: why}
		return agents.Prepared{Outcome: body.ToolOutcome}, b.recordCall(ctx, body)
	}
	runMade := b.statusCalls - b.progress.CountedCalls + b.made
	v := workflow.GuardCall(b.plan, b.agent, b.made, runMade, b.uses, workflow.UseOf(b.step, call))
	switch {
	case v.Trip != nil:
		return agents.Prepared{}, v.Trip
	case v.Refusal != "":
		body.Refusal = v.Refusal
		return refuse(v.Why)
	}
	// The taint of the context the model asked for the call in: the calls of one turn are
	// all prepared before any of them is sent.
	taint := b.Taint()
	if taint != nil {
		body.Taint = taint.Source
	}
	if b.plan.RefusesTainted(b.agent, call.Server, taint != nil) {
		body.Refusal = workflow.RefusalTainted
		return refuse(workflow.TaintedWhy)
	}
	if g, ok := b.plan.CallGate(b.agent, call.Server, call.Tool, taint != nil); ok {
		rec, approvedBy, decided := workflow.GateDecision(b.approvals, g.Name, b.step, call.Index)
		switch {
		case !decided:
			return agents.Prepared{}, &workflow.Held{Gate: g.Name, Call: call, Taint: body.Taint}
		case rec.Decision == v1alpha1.RecordRejected:
			body.Refusal = workflow.RefusalRejected
			return refuse(workflow.RejectedWhy(rec.By, rec.Feedback))
		}
		body.ApprovedBy = approvedBy
	}
	if b.plan.SideEffects(b.agent, call.Server) {
		started, err := b.markStarted(ctx, body)
		if err != nil {
			return agents.Prepared{}, err
		}
		if !started {
			// Sent before the operator stopped, with no outcome recorded: it may have taken
			// effect, and a tool with side effects is never sent twice.
			b.made++
			body.ToolOutcome = workflow.ToolOutcome{Made: true, IsError: true, Content: "the outcome of this call is unknown: it was sent before the operator restarted and is not sent again (the tool has side effects); check its effect before calling it again"}
			return agents.Prepared{Outcome: body.ToolOutcome}, b.recordCall(ctx, body)
		}
	}
	b.made++
	once := b.plan.SideEffects(b.agent, call.Server)
	return agents.Prepared{Send: func(ctx context.Context) (workflow.ToolOutcome, error) {
		send := ctx
		if once {
			// Sent once: a server may have acted on a call it answered with an error.
			send = agents.SendOnce(ctx)
		}
		body.Started = time.Now().UTC()
		send, span := StartSpan(send, call)
		body.ToolOutcome, body.Structured = b.send(send, call, body.IdempotencyKey)
		b.tainted(call.Server, call.Tool)
		s := b.screen(ctx, &body)
		EndSpan(span, call, body.ToolOutcome, b.content)
		body.LatencyMs = time.Since(body.Started).Milliseconds()
		if err := b.recordCall(ctx, body); err != nil || s.Gated == nil {
			return body.ToolOutcome, err
		}
		// Recorded as it waits: its result is not sent again, and the model sees it only as
		// people decide.
		return body.ToolOutcome, heldResult(body, s)
	}}, nil
}

// send makes the call on its server. A failure to get an answer is an error result.
func (b *Box) send(ctx context.Context, call workflow.ToolCall, key string) (workflow.ToolOutcome, json.RawMessage) {
	client, err := b.client(ctx, call.Server)
	if err != nil {
		return workflow.ToolOutcome{Made: true, IsError: true, Content: err.Error()}, nil
	}
	res, err := client.Call(ctx, tools.Call{Tool: call.Tool, Arguments: call.Arguments, IdempotencyKey: key})
	if err != nil {
		return workflow.ToolOutcome{Made: true, IsError: true, Content: err.Error()}, nil
	}
	return workflow.ToolOutcome{Made: true, IsError: res.IsError, Content: res.Content}, res.Structured
}

// idempotencyKey is the same every time the call is sent: run UID, step, call.
func (b *Box) idempotencyKey(call workflow.ToolCall) string {
	return fmt.Sprintf("%s/%d/%d", b.run.UID, b.step, call.Index)
}

// markStarted records that a call of a tool with side effects is about to be sent. started is
// false when an earlier execution of the step already marked it.
func (b *Box) markStarted(ctx context.Context, body records.CallBody) (started bool, err error) {
	key := transcript.Key{Kind: transcript.KindToolStart, Step: b.step, Call: body.Index}
	_, found, err := b.store.Get(ctx, b.run.UID, key)
	if err != nil {
		return false, fmt.Errorf("reading whether call %d was sent: %w", body.Index, err)
	}
	if found {
		return false, nil
	}
	data := transcript.Body(records.StartBody{Server: body.Server, Tool: body.Tool, IdempotencyKey: body.IdempotencyKey})
	return true, b.append(ctx, b.run.Record(key, time.Now(), data))
}

// recordCall writes a call's outcome. The outcome of a call that was sent is written even when
// the step's deadline passed meanwhile: it is what keeps the call from being sent again.
func (b *Box) recordCall(ctx context.Context, body records.CallBody) error {
	b.count(body)
	body.Content = textbound.Stored(body.Content, tools.MaxResultBytes)
	data := transcript.Body(body)
	return b.append(ctx, b.run.Record(transcript.Key{Kind: transcript.KindTool, Step: b.step, Call: body.Index}, time.Now(), data))
}

// count counts a call's outcome: ok, error or refused. Only names the config declares become
// metric labels (a server's name, a tool an allow list names, an HTTP tool's one tool); any
// other is "(other)": neither a model's made-up names nor a tool server that renames its tools
// can grow the metric.
func (b *Box) count(body records.CallBody) {
	server, tool := metrics.Other, metrics.Other
	if s, ok := b.plan.ToolServer(body.Server); ok {
		server = body.Server
		if b.declared(s, body.Tool) && b.offered[body.Server+"/"+body.Tool] {
			tool = body.Tool
		}
	}
	result := "ok"
	switch {
	case body.Refused != "" || !body.Made:
		result = "refused"
	case body.IsError:
		result = "error"
	}
	metrics.ToolCalls.WithLabelValues(b.run.Namespace, b.config, server, tool, result).Inc()
}

// declared reports whether the config names the tool of the server for the step's agent.
func (b *Box) declared(s v1alpha1.ToolServer, tool string) bool {
	if s.HTTP != nil {
		return tool == cmp.Or(s.HTTP.Tool, s.Name)
	}
	t, ok := b.plan.AgentTools(b.agent, s.Name)
	return ok && slices.Contains(t.Allow, tool)
}

// appendBackoff paces the retries of a tool record's write.
var appendBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: 6}

// append writes a record, trying again for a few seconds past the step's own deadline.
func (b *Box) append(ctx context.Context, rec transcript.Record) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	backoff := appendBackoff
	for {
		stored, err := b.store.Append(wctx, rec)
		if err == nil {
			b.bytes.Add(int64(len(stored[0].Body)))
			return nil
		}
		if backoff.Steps <= 1 || errors.Is(err, transcript.ErrBadRecord) {
			return fmt.Errorf("writing %s record of step %d to the transcript: %w", rec.Kind, rec.Step, err)
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("writing %s record of step %d to the transcript: %w", rec.Kind, rec.Step, err)
		case <-time.After(backoff.Step()):
		}
	}
}

// Unavailable names the tool servers that could not be listed for the step.
func (b *Box) Unavailable() []string { return b.unavailable }

// RecordBytes is what the step's tool records take in the transcript.
func (b *Box) RecordBytes() int64 { return b.bytes.Load() }
