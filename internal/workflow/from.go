package workflow

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
)

// A run may start where an earlier run was after one of its steps (spec.from). The earlier
// run's status at that step is rebuilt from its transcript: its recorded steps, and the
// decisions people made between them, are applied again, in order, on the new run's plan (the
// config as it is now); no agent is called. The replay passes no gate the new run itself would
// not: a gate between two replayed steps passes only where the transcript records enough
// approvals that still count under the current config, a gate's timeout only where the gate
// still approves on timeout, a tool call only where its agent may still call the tool and the
// call had the approvals its gate now needs. The gate that follows the last replayed step
// opens again, for the new run's own approvers.

// RecordedStep is a step of an earlier run as its transcript holds it.
type RecordedStep struct {
	Result StepResult
	// Time is when the step ended.
	Time time.Time
	// Calls are the tool calls the step asked for, in order, as their records hold them.
	Calls []RecordedCall
	// Latency is how long the step's last attempt took, when the record says.
	Latency time.Duration
}

// RecordedCall is a tool call of a recorded step.
type RecordedCall struct {
	Server, Tool string
	// Digest is the digest of its arguments (ArgumentsDigest), and Malformed is set when they
	// were not a JSON object.
	Digest    string
	Malformed bool
	// Refused is set when the call was not made (rejected at its gate, not allowed, past a
	// limit), and Refusal says why, when the record does.
	Refused bool
	Refusal Refusal
	// ApprovedBy are who approved the call at its gate (v1alpha1.ByTimeout for its timeout).
	ApprovedBy []string
	// Taint is where untrusted content in the call's context came from, when there was some: a
	// tainted call of a tool with side effects is judged at its taint gate.
	Taint string
	// Tokens and InputTokens are what the step's model turns used up to the one that asked
	// for the call.
	Tokens, InputTokens int64
}

// Timed is the recorded step's result under the plan's step timeout: a step that took longer
// than its agent may now is a step that timed out. known is false for a step that timed out
// where the plan would have waited longer: what the agent would have answered is not recorded.
func (p *Plan) Timed(s RecordedStep) (res StepResult, known bool) {
	limit := p.StepTimeout(s.Result.Agent)
	switch {
	case s.Latency <= 0:
		return s.Result, true
	case s.Result.TimedOut:
		return s.Result, s.Latency >= limit
	case s.Latency > limit+LateAnswer:
		return StepResult{Agent: s.Result.Agent, Input: s.Result.Input, TimedOut: true, Error: fmt.Sprintf("timed out after %s", limit)}, true
	}
	return s.Result, true
}

// LateAnswer is how long past a step's deadline an agent's answer is still taken.
const LateAnswer = time.Second

// Replay rebuilds the status of an earlier run, step by step, as its transcript is read: Decided
// takes the decisions recorded after a step, Step the next step, and Status the status after
// the last step given.
type Replay struct {
	p   *Plan
	run string
	st  v1alpha1.AgentRunStatus
	// uses are the tool calls that passed the guards, for the repeated-call detector.
	uses ToolUses
	// after holds the decisions recorded after each step, until the next step is replayed.
	after map[int32][]Decided
	// seq numbers the decisions replayed, for Decide's order.
	seq int64
	err error
}

// NewReplay starts replaying the earlier run `run`, which started at started with input, on
// the new run's plan p. Recorded approvals are judged against the new run's creator (p's) and
// against earlierCreator, who created the earlier run: neither may pass a gate with
// allowSelfApproval: false on their own approval.
func NewReplay(p *Plan, run, earlierCreator, input, revision string, started time.Time) *Replay {
	q := *p
	if earlierCreator != "" && earlierCreator != p.creator {
		q.alsoNotApprovedBy = earlierCreator
	}
	r := &Replay{p: &q, run: run, after: map[int32][]Decided{}}
	r.st = Start(r.p, v1alpha1.AgentRunStatus{}, input, revision, started).Status
	return r
}

// Decided takes a decision recorded after step `after` (0: before the first step).
func (r *Replay) Decided(after int32, d Decided) {
	if r.err == nil && after >= r.st.StepCount {
		r.after[after] = append(r.after[after], d)
	}
}

// Step replays step n, after the decisions recorded since the step before it. It fails when the
// step does not follow in the new run's plan.
func (r *Replay) Step(n int32, s RecordedStep) error {
	if r.err != nil {
		return r.err
	}
	if n != r.st.StepCount+1 {
		r.err = fmt.Errorf("run %s's transcript does not hold step %d", r.run, r.st.StepCount+1)
		return r.err
	}
	if n > 1 {
		r.decide(n - 1)
	}
	r.err = r.take(n, s)
	return r.err
}

// take applies step n to a running run whose decisions are applied.
func (r *Replay) take(n int32, s RecordedStep) error {
	st := &r.st
	switch st.Phase {
	case v1alpha1.PhaseRunning:
	case v1alpha1.PhaseAwaitingApproval:
		return fmt.Errorf("after step %d run %s waited at gate %s, and its transcript records no approval of it that counts under the current config%s: start from step %d, and the gate opens for this run",
			n-1, r.run, st.PendingApproval.Gate, r.why(), n-1)
	case v1alpha1.PhaseAwaitingInput:
		return fmt.Errorf("step %d asked for input and the transcript holds no reply", n-1)
	default:
		return fmt.Errorf("step %d does not follow: the run was %s after step %d", n, st.Phase, n-1)
	}
	if next := Next(r.p, st); next.Agent != s.Result.Agent {
		return fmt.Errorf("step %d was taken by %s, but %s has control after step %d in the current config", n, s.Result.Agent, next.Agent, n-1)
	}
	calls, err := r.p.GuardRecordedCalls(n, s.Result.Agent, st.ToolCalls, &r.uses, s.Calls)
	switch {
	case err != nil:
		return fmt.Errorf("%w: start from step %d or earlier", err, n-1)
	case calls.Trip != nil:
		return fmt.Errorf("step %d's call %d would end the run under the current config (%s): start from step %d or earlier", n, calls.At+1, calls.Trip.Message, n-1)
	}
	res, known := r.p.Timed(s)
	switch {
	case !known:
		return fmt.Errorf("step %d timed out after %s, and under the current config %s would have waited longer for its answer: start from step %d or earlier", n, s.Latency.Round(time.Millisecond), s.Result.Agent, n-1)
	case res.TimedOut != s.Result.TimedOut:
		return fmt.Errorf("step %d took %s, and under the current config %s times out after %s: start from step %d or earlier", n, s.Latency.Round(time.Millisecond), s.Result.Agent, r.p.StepTimeout(s.Result.Agent), n-1)
	}
	r.st = Apply(r.p, r.st, s.Result, s.Time).Status
	return nil
}

// decide applies the decisions recorded after step n, in order. A decision that does not count
// under the current config changes nothing; the run then still waits, and Step says why.
func (r *Replay) decide(n int32) {
	for _, d := range r.after[n] {
		if d.Step != 0 || d.ToolCall != 0 || strings.HasPrefix(d.Gate, v1alpha1.ToolGatePrefix) {
			// A tool gate's decision is judged with the call it held (GuardRecordedCalls).
			continue
		}
		if d.By == v1alpha1.ByTimeout {
			if u, expired := CheckWaiting(r.p, r.st, d.Time.Time); expired && !u.Status.Phase.Terminal() {
				r.st = u.Status
			} else if r.st.PendingApproval != nil {
				setCondition(&r.st, d.Time.Time, v1alpha1.ConditionDecision, metav1.ConditionFalse, v1alpha1.ReasonNotWaiting,
					fmt.Sprintf("gate %s passed by its timeout in run %s, and under the current config its timeout does not approve it then", d.Gate, r.run))
			}
			continue
		}
		r.seq++
		r.st = d.Apply(r.p, r.st, r.seq).Status
	}
	delete(r.after, n)
}

// why is what the last decision replayed said when it did not count, if it did not.
func (r *Replay) why() string {
	for _, c := range r.st.Conditions {
		if c.Type == v1alpha1.ConditionDecision && c.Status == metav1.ConditionFalse {
			return " (" + c.Message + ")"
		}
	}
	return ""
}

// Status is the earlier run's status after the last step replayed. It fails when the run had
// ended there.
func (r *Replay) Status() (v1alpha1.AgentRunStatus, error) {
	if r.err != nil {
		return r.st, r.err
	}
	if r.st.StepCount == 0 {
		return r.st, fmt.Errorf("run %s's transcript holds no step", r.run)
	}
	if r.st.Phase.Terminal() {
		return r.st, fmt.Errorf("the run ended %s at step %d: continue from an earlier step", r.st.TerminationReason, r.st.StepCount)
	}
	return r.st, nil
}

// queued is the decision as the queue held it when it was first made.
func (d Decided) queued(seq int64) decisions.Queued {
	q := decisions.Queued{Seq: seq, Gate: d.Gate, Revise: d.Revise, Feedback: d.Feedback, Reply: d.Reply, By: d.By, Time: d.Time}
	switch d.Decision {
	case v1alpha1.RecordApproved:
		q.Action = decisions.Approve
	case v1alpha1.RecordRejected:
		q.Action = decisions.Reject
	default:
		q.Action = decisions.Reply
	}
	return q
}

// StartFrom starts a run where an earlier one was: its replayed status, with the earlier run's
// counts, handoffs and state, the agent that had control, and the current config's revision.
// The run's own clock and decisions start afresh; input, when set, replaces the next agent's
// input. A gate the earlier run waited at after that step (or passed) opens again, for this
// run's approvers.
func StartFrom(p *Plan, replayed v1alpha1.AgentRunStatus, input, revision, from string, step int32, now time.Time) Update {
	d := Update{Status: *replayed.DeepCopy()}
	s := &d.Status
	start := metav1.NewMicroTime(now)
	s.StartTime, s.CompletionTime = &start, nil
	s.ConfigRevision = revision
	s.Waited, s.LastDecision, s.Approvals, s.Conditions = nil, 0, nil, nil
	if input != "" {
		s.Input = statusText(input, maxInput)
		taint(s, p.InputTaint())
	}
	msg := fmt.Sprintf("pinned as %s, continuing run %s after step %d", s.ConfigRevision, from, step)
	setCondition(s, now, v1alpha1.ConditionConfigResolved, metav1.ConditionTrue, v1alpha1.ReasonConfigPinned, msg)
	if pending := s.PendingApproval; pending != nil {
		g, _ := p.gateAt(stop{kind: stopContinued, agent: s.CurrentAgent, gate: pending.Gate})
		s.PendingApproval = nil
		openGate(p, &d, g, pending.Completes, now)
		return d
	}
	message := runningMessage
	if s.Phase != v1alpha1.PhaseRunning {
		message = msg
	}
	progress(s, now, s.Phase, message)
	if s.Phase == v1alpha1.PhaseRunning {
		if t, ok := check(p, s, now); ok {
			endOrWrapUp(p, &d, t, now)
		}
	}
	return d
}

// Apply applies a person's recorded decision, numbered seq, to the run, at the time it was
// made: a gate whose timeout came first under the plan has timed out by then, as the
// operator's DecideAll would have found it.
func (d Decided) Apply(p *Plan, st v1alpha1.AgentRunStatus, seq int64) Update {
	out := Update{Status: st}
	if u, expired := CheckWaiting(p, st, d.Time.Time); expired {
		out.then(u)
	}
	// A run the timeout ended takes no decision: Decide leaves it as it is.
	out.then(Decide(p, out.Status, d.queued(seq), d.Time.Time))
	return out
}

// Queued is the recorded decision as a decision queue holds it, numbered seq.
func (d Decided) Queued(seq int64) decisions.Queued { return d.queued(seq) }
