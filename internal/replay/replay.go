// Package replay runs a recorded run through the workflow core again, on a config that may have
// changed, and says where the new path leaves the recorded one (docs/design/replay.md). Each
// agent answers with its recorded turns, in the order it took them; people's decisions are the
// recorded ones; time is the record's. It is a shell around the core with nothing under it: no
// client, clock, provider or store. A turn the recording does not hold stops the replay, or is
// handed to the caller's Live, which calls the agent (package replay/live). A fan-out's
// branches are replayed from the recordings of the branch runs (branches.go). A recording may
// hold its steps by their place and read each back as its turn comes (Recording.Load), so that
// a replay holds what it compares and not what the agents said (package replay/stored).
package replay

import (
	"fmt"
	"slices"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Recording is a recorded run as a replay reads it.
type Recording struct {
	// Run names the recorded run, for messages.
	Run string
	// Input is the run's input, Started when it started, Revision the config it pinned.
	Input    string
	Started  time.Time
	Revision string
	// Steps are the run's steps, in order: each agent's turns are its steps in this order.
	Steps []workflow.RecordedStep
	// Load, when set, reads step i's whole result back when the replay takes its turn: a
	// recording read from the transcript store keeps of each step only its agent, time,
	// latency and tool calls, not what the agent said (Builder.Reload), so that what a replay
	// holds does not grow with what the recorded run's agents said. Nil, Steps are whole.
	Load func(i int) (workflow.StepResult, error)
	// Decisions are people's decisions (and gates' timeouts), in the order they were made.
	Decisions []workflow.Decided
	// Path is the run's whole handoff sequence, and End its status at the end.
	Path []v1alpha1.HandoffRecord
	End  v1alpha1.AgentRunStatus
	// ToolResults are the results of the tool calls the run made, in order, when the recording
	// was built to keep them (Builder.ToolResults): a turn answered live is given them.
	ToolResults []ToolResult
	// Branch is the run's spec.branch, when it is a branch of another run's fan-out; Branches
	// are the recordings of its own branch runs.
	Branch   *v1alpha1.RunBranch
	Branches []Recording
}

// ToolResult is a tool call a recorded step made, and what it came to.
type ToolResult struct {
	Agent   string
	Call    workflow.ToolCall
	Outcome workflow.ToolOutcome
	// ApprovedBy are who approved the call at its gate.
	ApprovedBy []string
	// Taint is where untrusted content in the call's context came from, when there was some.
	Taint string
}

// Live answers a turn the recording does not hold, by calling the agent. An error stops the
// replay, saying why; a step that fails is a result with its Error.
type Live func(LiveTurn) (workflow.StepResult, error)

// LiveTurn is a step to answer live, with what the agent is shown of the replayed run.
type LiveTurn struct {
	Step workflow.Step
	// From is the replayed run's status the step starts from, Now the replay's time.
	From *v1alpha1.AgentRunStatus
	Now  time.Time
	// Context is everything the replayed run's steps and people said so far, oldest first: the
	// caller keeps the window the config's context budget allows.
	Context []workflow.ContextEntry
	// Previous is the answer a continuation or repair works on, and Errors why it failed its
	// schema.
	Previous, Errors string
	// Uses are the tool calls the replayed run's guards passed so far, for the repeated-call
	// detector: the turn's calls go through the same guards (workflow.GuardCall), and are
	// added.
	Uses *workflow.ToolUses
}

// Options are how a replay goes.
type Options struct {
	// Live, when set, answers the turns the recording does not hold.
	Live Live
	// MaxLive is the most turns answered live (DefaultMaxLive when 0).
	MaxLive int
}

// DefaultMaxLive is the most turns a replay answers live unless told otherwise: the run's own
// limits end most runs well before.
const DefaultMaxLive = 100

// Run replays the recording on plan p: the plan of the config to check, for the recorded run
// (its limits and approvals, and its creator, who may not pass a gate that forbids it).
func Run(p *workflow.Plan, rec Recording, opts Options) Report {
	r := newRunner(p, rec, opts)
	r.run()
	return r.report()
}

// report is what the replay found.
func (r *runner) report() Report {
	return Report{
		Recorded: summary(r.rec.End, r.rec.Path, gateNames(r.rec.Decisions)),
		Replayed: summary(r.st, r.history, r.reached),
		Diverged: diverged(r.rec.Path, r.history),
		Stopped:  r.stopped,
		Live:     r.live,
		Branches: r.branches,
		Err:      r.err,
	}
}

// runner is one replay under way.
type runner struct {
	p   *workflow.Plan
	rec Recording
	st  v1alpha1.AgentRunStatus
	// turns are each agent's recorded steps not yet replayed, in order, as places in
	// rec.Steps.
	turns map[string][]int
	// decided are the recorded decisions not yet applied.
	decided []workflow.Decided
	seq     int64
	now     time.Time
	// history is the replayed handoff sequence, whole (status keeps the latest); applied the
	// decisions the replayed run applied, whole.
	history []v1alpha1.HandoffRecord
	reached []string
	stopped string
	// exhausted is set when the replay stopped because the recording holds no more to answer
	// the run with (a turn, a decision, a reply).
	exhausted bool
	// err is why the recording could not be read back (Recording.Load), if it could not.
	err error
	// uses are the tool calls that passed the guards, for the repeated-call detector.
	uses workflow.ToolUses

	opts Options
	// context is what the replayed run's steps and people said, for live turns; last the
	// output and errors of its latest step; live the steps answered live. Without Live, they
	// are not kept: they are what the agents said, as long as the run.
	context      []workflow.ContextEntry
	last, errors string
	live         []int32
	// branches are the replays of the branches of its fan-outs.
	branches []BranchReport
}

func newRunner(p *workflow.Plan, rec Recording, opts Options) *runner {
	if opts.MaxLive <= 0 {
		opts.MaxLive = DefaultMaxLive
	}
	r := &runner{p: p, rec: rec, opts: opts, turns: map[string][]int{}, now: rec.Started,
		decided: append([]workflow.Decided(nil), rec.Decisions...)}
	for i, s := range rec.Steps {
		r.turns[s.Result.Agent] = append(r.turns[s.Result.Agent], i)
	}
	r.st = workflow.Start(p, v1alpha1.AgentRunStatus{}, rec.Input, rec.Revision, rec.Started).Status
	r.keep()
	return r
}

// run takes the replayed run as far as the recording answers it.
func (r *runner) run() {
	// Every move uses a recorded step or decision, joins a fan-out's branches, answers live, or
	// ends the run: there are no more moves.
	moves := 2*len(r.rec.Steps) + len(r.rec.Decisions) + 2
	if r.opts.Live != nil {
		moves += r.opts.MaxLive
	}
	for range moves {
		switch {
		case r.st.Phase.Terminal() || r.stopped != "":
			return
		case r.st.Phase == v1alpha1.PhaseAwaitingApproval || r.st.Phase == v1alpha1.PhaseAwaitingInput:
			r.decide()
		case r.st.Phase == v1alpha1.PhaseRunning:
			r.step()
		default:
			r.stop("the run is %s", r.st.Phase)
		}
	}
	if !r.st.Phase.Terminal() && r.stopped == "" {
		r.exhausted = true
		r.stop("the recording holds nothing more to answer the run with")
	}
}

// step is the run's next move, as the operator's reconcile would decide it
// (workflow.NextAction): its branches joined, a guard that trips, or its next step taken with
// its agent's next recorded turn.
func (r *runner) step() {
	f := workflow.Facts{Now: r.now, Status: r.st, Plan: r.p}
	a := workflow.NextAction(f)
	switch {
	case a.Kind == workflow.Look && a.Need == workflow.NeedBranches:
		r.join()
	case a.Kind == workflow.Look && a.Need == workflow.NeedStep:
		res, ok := r.take(a.Step)
		if !ok {
			return
		}
		f.Now, f.Step = r.now, &workflow.StepFacts{Number: a.Step.Number, State: workflow.StepEnded, Result: res}
		r.applyStep(res, workflow.NextAction(f).Update)
	case a.Kind == workflow.Write:
		r.apply(a.Update)
	default:
		r.stop("after step %d the run cannot go on", r.st.StepCount)
	}
}

// take answers step next with its agent's next recorded turn, or live. ok is false when the
// recording cannot say, and the replay stopped.
func (r *runner) take(next workflow.Step) (workflow.StepResult, bool) {
	queue := r.turns[next.Agent]
	if len(queue) == 0 {
		return r.answerLive(next)
	}
	turn, ok := r.turn(queue[0])
	r.turns[next.Agent] = queue[1:]
	if !ok {
		return workflow.StepResult{}, false
	}
	if turn.Time.After(r.now) {
		r.now = turn.Time
	}
	res, ok := r.recorded(next, turn)
	if !ok {
		return workflow.StepResult{}, false
	}
	res.Input = next.Input
	res.CountedTokens, res.CountedInputTokens, res.CountedCost, res.CountedToolCalls = 0, 0, "", 0
	res.Held = nil
	return res, true
}

// turn is recorded step i, whole: read back (Recording.Load) when the recording keeps only
// its place. ok is false when it cannot be, and the replay stopped.
func (r *runner) turn(i int) (workflow.RecordedStep, bool) {
	turn := r.rec.Steps[i]
	if r.rec.Load == nil {
		return turn, true
	}
	res, err := r.rec.Load(i)
	if err != nil {
		r.err = err
		r.stop("the recording of run %s cannot be read: %v", r.rec.Run, err)
		return workflow.RecordedStep{}, false
	}
	turn.Result = res
	return turn, true
}

// recorded is what a recorded turn answers step next under the replayed plan: its answer, or a
// timeout, or the guard that stops the run at one of its tool calls. ok is false when the
// recording cannot say (the replay stopped, or the step was answered live).
func (r *runner) recorded(next workflow.Step, turn workflow.RecordedStep) (workflow.StepResult, bool) {
	calls, err := r.p.GuardRecordedCalls(next.Number, next.Agent, r.st.ToolCalls, &r.uses, turn.Calls)
	if err != nil {
		r.stop("%v", err)
		return workflow.StepResult{}, false
	}
	r.reach(calls.Gates...)
	if calls.Trip != nil {
		return workflow.StepResult{Agent: next.Agent, Result: workflow.Result{Trip: calls.Trip,
			Tokens: calls.Tokens, InputTokens: calls.InputTokens, ToolCalls: calls.ToolCalls}}, true
	}
	if trip := turn.Result.Trip; trip != nil {
		now, err := r.p.GuardRecordedTrip(next.Agent, r.st.ToolCalls, &r.uses, calls, trip)
		if err != nil {
			r.stop("%v", err)
			return workflow.StepResult{}, false
		}
		turn.Result.Trip = now
	}
	res, known := r.p.Timed(turn)
	if !known {
		r.stop("step %d is %s's, whose recorded turn timed out after %s, and under this config it would have waited longer for the answer",
			next.Number, next.Agent, turn.Latency.Round(time.Millisecond))
		return workflow.StepResult{}, false
	}
	return res, true
}

// reach notes gates the replayed run reached, in order.
func (r *runner) reach(gates ...string) {
	for _, g := range gates {
		if g != "" && !slices.Contains(r.reached, g) {
			r.reached = append(r.reached, g)
		}
	}
}

// answerLive answers a step the recording holds no turn for: live, when the replay may, else it
// stops there.
func (r *runner) answerLive(next workflow.Step) (workflow.StepResult, bool) {
	switch {
	case r.opts.Live == nil:
		r.exhausted = true
		r.stop("step %d is %s's, and the recording holds no more turns of %s", next.Number, next.Agent, next.Agent)
		return workflow.StepResult{}, false
	case len(r.live) >= r.opts.MaxLive:
		r.stop("step %d is %s's, and the replay answered %d turns live, as many as it may", next.Number, next.Agent, len(r.live))
		return workflow.StepResult{}, false
	}
	turn := LiveTurn{Step: next, From: r.st.DeepCopy(), Now: r.now, Context: slices.Clone(r.context), Uses: &r.uses}
	if next.Continues || next.Repairs {
		turn.Previous, turn.Errors = r.last, r.errors
	}
	res, err := r.opts.Live(turn)
	if err != nil {
		r.stop("step %d is %s's, answered live: %v", next.Number, next.Agent, err)
		return workflow.StepResult{}, false
	}
	r.live = append(r.live, next.Number)
	res.Agent, res.Input = next.Agent, next.Input
	res.CountedTokens, res.CountedInputTokens, res.CountedCost, res.CountedToolCalls = 0, 0, "", 0
	res.Held = nil
	return res, true
}

// applyStep applies d, the update of a step's answer res, keeping what it adds to later agents'
// context.
func (r *runner) applyStep(res workflow.StepResult, d workflow.Update) {
	if r.opts.Live != nil {
		r.last, r.errors = res.Output, ""
		for _, c := range d.Context {
			if c.Kind == workflow.ContextInvalid {
				r.errors = c.Text
			}
		}
	}
	r.apply(d)
}

// decide applies the recorded decisions of the gate the run waits at, or the next reply it
// waits for, in order, until it waits no more.
func (r *runner) decide() {
	gate, waiting := r.waitingFor()
	for i := 0; i < len(r.decided); i++ {
		d := r.decided[i]
		if !matches(d, gate, waiting) {
			continue
		}
		r.decided = append(r.decided[:i], r.decided[i+1:]...)
		if d.Time.After(r.now) {
			r.now = d.Time.Time
		}
		if d.By == v1alpha1.ByTimeout {
			if a := workflow.NextAction(workflow.Facts{Now: r.now, Status: r.st, Plan: r.p}); a.Kind == workflow.Write {
				r.apply(a.Update) // the gate's timeout, as the operator applies it
			}
		} else {
			r.seq++
			r.apply(d.Apply(r.p, r.st, r.seq))
		}
		return
	}
	r.exhausted = true
	if waiting == v1alpha1.PhaseAwaitingInput {
		r.stop("after step %d the run waits for a reply, and the recording holds none more", r.st.StepCount)
		return
	}
	r.stop("after step %d the run waits at gate %s, and the recording holds no decision of it that passes it", r.st.StepCount, gate)
}

// waitingFor is the gate the run waits at, or that it waits for a reply.
func (r *runner) waitingFor() (string, v1alpha1.RunPhase) {
	if r.st.Phase == v1alpha1.PhaseAwaitingInput {
		return "", v1alpha1.PhaseAwaitingInput
	}
	if pa := r.st.PendingApproval; pa != nil {
		return pa.Gate, v1alpha1.PhaseAwaitingApproval
	}
	return "", r.st.Phase
}

// matches reports whether a recorded decision answers what the run waits for.
func matches(d workflow.Decided, gate string, waiting v1alpha1.RunPhase) bool {
	if waiting == v1alpha1.PhaseAwaitingInput {
		return d.Decision == v1alpha1.RecordReplied
	}
	return d.Gate == gate && d.Decision != v1alpha1.RecordReplied
}

// apply takes the core's update, and keeps the handoff records, context and decisions it adds.
func (r *runner) apply(d workflow.Update) {
	r.st = d.Status
	if r.opts.Live != nil {
		r.context = append(r.context, d.Context...)
	}
	r.reach(gateNames(d.Decided)...)
	if pa := r.st.PendingApproval; pa != nil {
		r.reach(pa.Gate)
	}
	r.keep()
}

// keep adds the status's handoff records not yet kept to the whole sequence.
func (r *runner) keep() { r.history = appendLater(r.history, r.st.HandoffSequence) }

// appendLater appends to path the records of hs that come after its last: the status keeps
// the latest records, and those past what path holds are new.
func appendLater(path, hs []v1alpha1.HandoffRecord) []v1alpha1.HandoffRecord {
	for _, h := range hs {
		if len(path) == 0 || workflow.RecordAfter(h, path[len(path)-1]) {
			path = append(path, h)
		}
	}
	return path
}

func (r *runner) stop(format string, args ...any) {
	if r.stopped == "" {
		r.stopped = fmt.Sprintf(format, args...)
	}
}
