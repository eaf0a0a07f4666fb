// Package replay runs a recorded run through the workflow core again, on a config that may have
// changed, and says where the new path leaves the recorded one (docs/design/replay.md). Each
// agent answers with its recorded turns, in the order it took them; people's decisions are the
// recorded ones; time is the record's. It is a shell around the core with nothing under it: no
// client, clock, provider or store.
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
	// Decisions are people's decisions (and gates' timeouts), in the order they were made.
	Decisions []workflow.Decided
	// Path is the run's whole handoff sequence, and End its status at the end.
	Path []v1alpha1.HandoffRecord
	End  v1alpha1.AgentRunStatus
}

// Summary is what a run came to: its phase, end and use.
type Summary struct {
	Phase   v1alpha1.RunPhase          `json:"phase"`
	Reason  v1alpha1.TerminationReason `json:"reason,omitempty"`
	Message string                     `json:"message,omitempty"`
	Steps   int32                      `json:"steps"`
	Tokens  int64                      `json:"tokens"`
	Cost    string                     `json:"cost,omitempty"`
	Path    []v1alpha1.HandoffRecord   `json:"path"`
	// Output is the run's output; Gates the gates it reached, in the order it first reached
	// them (the one it waits at last, if it waits).
	Output string   `json:"output,omitempty"`
	Gates  []string `json:"gates,omitempty"`
}

// Report is a replay's outcome.
type Report struct {
	Recorded Summary `json:"recorded"`
	Replayed Summary `json:"replayed"`
	// Diverged is the place (from 1) in the handoff sequences where they first differ: another
	// agent, destination or outcome, or one of them ends. 0 when they are the same.
	Diverged int `json:"diverged,omitempty"`
	// Stopped says why the replay stopped before the replayed run ended, if it did.
	Stopped string `json:"stopped,omitempty"`
}

// Same reports whether the replay reproduced the recorded run: the same path, tokens and end.
func (r Report) Same() bool {
	return r.Diverged == 0 && r.Stopped == "" && r.Recorded.Reason == r.Replayed.Reason &&
		r.Recorded.Tokens == r.Replayed.Tokens && r.Recorded.Phase == r.Replayed.Phase
}

// Run replays the recording on plan p: the plan of the config to check, for the recorded run
// (its limits and approvals, and its creator, who may not pass a gate that forbids it).
func Run(p *workflow.Plan, rec Recording) Report {
	r := newRunner(p, rec)
	r.run()
	return Report{
		Recorded: summary(rec.End, rec.Path),
		Replayed: summary(r.st, r.st.HandoffSequence),
		Diverged: diverged(rec.Path, r.history),
		Stopped:  r.stopped,
	}
}

// runner is one replay under way.
type runner struct {
	p   *workflow.Plan
	rec Recording
	st  v1alpha1.AgentRunStatus
	// turns are each agent's recorded steps not yet replayed, in order.
	turns map[string][]workflow.RecordedStep
	// decided are the recorded decisions not yet applied.
	decided []workflow.Decided
	seq     int64
	now     time.Time
	// history is the replayed handoff sequence, whole (status keeps the latest).
	history []v1alpha1.HandoffRecord
	stopped string
}

func newRunner(p *workflow.Plan, rec Recording) *runner {
	r := &runner{p: p, rec: rec, turns: map[string][]workflow.RecordedStep{}, now: rec.Started,
		decided: append([]workflow.Decided(nil), rec.Decisions...)}
	for _, s := range rec.Steps {
		r.turns[s.Result.Agent] = append(r.turns[s.Result.Agent], s)
	}
	r.st = workflow.Start(p, v1alpha1.AgentRunStatus{}, rec.Input, rec.Revision, rec.Started).Status
	r.keep()
	return r
}

// run takes the replayed run as far as the recording answers it.
func (r *runner) run() {
	// Every move uses a recorded step or decision, or ends the run: there are no more moves.
	for range len(r.rec.Steps) + len(r.rec.Decisions) + 2 {
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
		r.stop("the recording holds nothing more to answer the run with")
	}
}

// step takes the run's next step with its agent's next recorded turn, after the guards.
func (r *runner) step() {
	if workflow.Branching(&r.st) {
		r.stop("step %d fans out to branches, whose runs have recordings of their own", r.st.StepCount)
		return
	}
	if d, tripped := workflow.Check(r.p, r.st, r.now); tripped {
		r.apply(d)
		return
	}
	next := workflow.Next(r.p, &r.st)
	queue := r.turns[next.Agent]
	if len(queue) == 0 {
		r.stop("step %d is %s's, and the recording holds no more turns of %s", next.Number, next.Agent, next.Agent)
		return
	}
	turn := queue[0]
	r.turns[next.Agent] = queue[1:]
	if err := r.p.CheckRecordedCalls(next.Number, next.Agent, turn.Calls); err != nil {
		r.stop("%v", err)
		return
	}
	res := turn.Result
	res.Input = next.Input
	res.CountedTokens, res.CountedInputTokens, res.CountedCost, res.CountedToolCalls = 0, 0, "", 0
	res.Held = nil
	if turn.Time.After(r.now) {
		r.now = turn.Time
	}
	r.apply(workflow.Apply(r.p, r.st, res, r.now))
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
			if u, expired := workflow.CheckWaiting(r.p, r.st, r.now); expired {
				r.apply(u)
			}
		} else {
			r.seq++
			r.apply(workflow.Decide(r.p, r.st, d.Queued(r.seq), r.now))
		}
		return
	}
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

// apply takes the core's update, and keeps the handoff records it adds.
func (r *runner) apply(d workflow.Update) {
	r.st = d.Status
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

func summary(st v1alpha1.AgentRunStatus, path []v1alpha1.HandoffRecord) Summary {
	return Summary{Phase: st.Phase, Reason: st.TerminationReason, Message: st.TerminationMessage,
		Steps: st.StepCount, Tokens: st.TokensUsed, Cost: st.Cost, Path: path, Output: st.Output, Gates: gatesOf(st)}
}

// gatesOf are the gates a run reached: those decided, in order, then the one it waits at.
func gatesOf(st v1alpha1.AgentRunStatus) []string {
	var out []string
	add := func(g string) {
		if g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	for _, a := range st.Approvals {
		add(a.Gate)
	}
	if pa := st.PendingApproval; pa != nil {
		add(pa.Gate)
	}
	return out
}

// diverged is the first place (from 1) where the two paths differ, 0 when they do not.
func diverged(a, b []v1alpha1.HandoffRecord) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) {
			return i + 1
		}
		x, y := a[i], b[i]
		if x.Step != y.Step || x.From != y.From || x.To != y.To || x.Outcome != y.Outcome {
			return i + 1
		}
	}
	return 0
}
