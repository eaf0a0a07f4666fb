package workflow

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
)

// People's decisions at gates, and their replies. A run waiting at a gate (gates.go) goes on once
// enough people approve; someone's rejection ends it or sends it back to an agent; or the gate
// times out. A run waiting for input goes on with a reply. Decisions arrive as queued decisions
// (see the decisions package) and are applied here one at a time, in order.

// selfApproval says why an approval by `by` at the config's gate of that name is refused, if
// it is: the gate has allowSelfApproval: false and `by` created the run, or nobody knows who
// did (the run was created without the admission webhook), so that no approval can be told
// apart from the creator's.
func (p *Plan) selfApproval(name, by string) (string, bool) {
	g, ok := p.configGate(name)
	if !ok || selfApprovalAllowed(g) {
		return "", false
	}
	switch p.creator {
	case "":
		return fmt.Sprintf("the run's creator was not recorded (it was created without Baton's admission webhook), so gate %s, which needs an approver other than the run's creator (allowSelfApproval: false), cannot be approved: reject it or let it time out", name), true
	case by:
		return fmt.Sprintf("%s created this run, and gate %s needs an approver other than the run's creator (allowSelfApproval: false)", by, name), true
	}
	if p.alsoNotApprovedBy != "" && by == p.alsoNotApprovedBy {
		return fmt.Sprintf("%s created the run this one continues, and gate %s needs an approver other than the run's creator (allowSelfApproval: false)", by, name), true
	}
	return "", false
}

// DecideAll applies people's decisions in order, into one update. A decision is judged at the
// time it was made: when a gate's timeout passed before that, the gate times out first (its
// onTimeout applies), and the decision then finds the run past the gate. So a decision that
// reached an operator which was away, or slow, never beats a timeout that came before it.
func DecideAll(p *Plan, st v1alpha1.AgentRunStatus, queue []decisions.Queued, now time.Time) Update {
	out := Update{Status: st}
	for _, q := range queue {
		if p != nil && !q.Time.IsZero() && q.Time.Time.Before(now) {
			if u, expired := CheckWaiting(p, out.Status, q.Time.Time); expired {
				out.then(u)
			}
		}
		out.then(Decide(p, out.Status, q, now))
	}
	return out
}

// then makes d the update of its own changes followed by next's, made on d's status.
func (d *Update) then(next Update) {
	d.Status = next.Status
	d.Events = append(d.Events, next.Events...)
	d.Context = append(d.Context, next.Context...)
	d.Decided = append(d.Decided, next.Decided...)
	d.Guard = cmp.Or(next.Guard, d.Guard)
}

// Decide applies one queued human decision. A decision the run cannot take changes nothing but
// the Decision condition and an Event that say why.
func Decide(p *Plan, st v1alpha1.AgentRunStatus, q decisions.Queued, now time.Time) Update {
	if st.Phase.Terminal() {
		return Update{Status: st}
	}
	d := decide(p, st, q, now)
	for i := range d.Events {
		d.Events[i].Action = fmt.Sprintf("Decision%d", q.Seq)
	}
	return d
}

func decide(p *Plan, st v1alpha1.AgentRunStatus, q decisions.Queued, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	s.LastDecision = max(s.LastDecision, q.Seq)
	by := firstNonEmpty(q.By, v1alpha1.ByUnverified)
	what := describeDecision(q, by)
	if why, reason, ok := refuse(p, s, q, by); !ok {
		msg := what + " changed nothing: " + why
		setCondition(s, now, v1alpha1.ConditionDecision, metav1.ConditionFalse, reason, msg)
		d.event(EventWarning, EventDecisionIgnored, "%s", msg)
		return d
	}
	when := now
	if !q.Time.IsZero() && q.Time.Time.Before(now) {
		when = q.Time.Time
	}
	record := v1alpha1.ApprovalRecord{Gate: q.Gate, By: by, Time: metav1.NewTime(when), Feedback: q.Feedback}
	if pa := s.PendingApproval; pa != nil && q.Action != decisions.Reply {
		record.Step, record.ToolCall = heldAt(*pa)
	}
	if q.Feedback != "" {
		addContext(&d, by, ContextFeedback, q.Feedback)
	}
	if q.Action == decisions.Reply {
		addContext(&d, by, ContextReply, q.Reply)
	}
	if act, ok := decisionActions[q.Action]; ok {
		act(&applying{p: p, d: &d, q: q, by: by, what: what, record: record, now: now})
	}
	return d
}

// applying is a person's decision as the run applies it: the update it makes, who made it, what
// it says, and the record status.approvals keeps of it.
type applying struct {
	p      *Plan
	d      *Update
	q      decisions.Queued
	by     string
	what   string
	record v1alpha1.ApprovalRecord
	now    time.Time
}

// decisionActions apply each kind of decision, once refuse found that the run can take it.
var decisionActions = map[string]func(*applying){
	decisions.Approve: approve,
	decisions.Reject:  reject,
	decisions.Reply:   reply,
}

// applied says, in the Decision condition and an Event, what the decision did.
func (x *applying) applied(msg string) {
	setCondition(&x.d.Status, x.now, v1alpha1.ConditionDecision, metav1.ConditionTrue, v1alpha1.ReasonApplied, msg)
	x.d.event(EventNormal, EventDecisionApplied, "%s", msg)
}

// approve counts an approval at the pending gate, which passes once it has as many as it needs.
func approve(x *applying) {
	s := &x.d.Status
	x.record.Decision = v1alpha1.RecordApproved
	appendApproval(x.d, x.record, "")
	pa := s.PendingApproval
	pa.ApprovedBy = append(pa.ApprovedBy, x.by)
	g, _ := x.p.pendingGate(s)
	if len(pa.ApprovedBy) < required(g) {
		x.applied(fmt.Sprintf("%s: %d of %d approvals", x.what, len(pa.ApprovedBy), required(g)))
		return
	}
	x.applied(fmt.Sprintf("%s: gate %s passed", x.what, pa.Gate))
	passGate(x.p, x.d, x.q.Feedback, x.now)
}

// reject refuses a held tool call, which the agent is told of, or blocks a guardrail's held
// text, or ends the run at its gate, or sends it back to the agent that revises.
func reject(x *applying) {
	s := &x.d.Status
	x.record.Decision = v1alpha1.RecordRejected
	x.record.Revise = x.q.Revise
	appendApproval(x.d, x.record, "")
	pending := *s.PendingApproval
	switch {
	case pending.Guard != nil:
		// The step goes on and blocks the text, as the guardrail's block would.
		x.applied(fmt.Sprintf("%s: %s is blocked", x.what, guardedText(*pending.Guard, pendingCall(pending))))
		resume(x.p, x.d, pending.Since, x.now)
	case pending.ToolCall != nil:
		// A rejected call is not made: the step goes on, and the agent is told.
		x.applied(fmt.Sprintf("%s: the call is not made and %s is told", x.what, s.CurrentAgent))
		resume(x.p, x.d, pending.Since, x.now)
	case x.q.Revise == "" || s.WrappingUp != nil:
		x.applied(x.what)
		s.PendingApproval = nil
		s.Waited = addWait(s.Waited, x.now.Sub(pending.Since.Time))
		msg := fmt.Sprintf("gate %s rejected by %s", pending.Gate, x.by)
		if x.q.Feedback != "" {
			msg += ": " + x.q.Feedback
		}
		if x.q.Revise != "" {
			// A run wrapping up has no turn left to revise in: its limit ran out.
			msg += fmt.Sprintf("; not revised by %s: the run was wrapping up after a limit ran out", x.q.Revise)
		}
		end(x.d, Trip{Reason: v1alpha1.ReasonRejected, Message: msg}, x.now)
	default:
		revise(x, pending)
	}
}

// revise sends a run rejected at its gate back to the agent the rejection names, with the
// feedback and the output it rejected.
func revise(x *applying, pending v1alpha1.PendingApproval) {
	s := &x.d.Status
	agent, state, _ := reviser(x.p, x.q.Revise)
	earlier := s.Input
	if pending.Completes != nil {
		earlier = s.Output
	}
	s.CurrentAgent, s.State = agent, state
	s.Input = statusText(fmt.Sprintf("Rejected at gate %s by %s. Feedback: %s\n\nEarlier output:\n%s",
		pending.Gate, x.by, firstNonEmpty(x.q.Feedback, "(none)"), earlier), maxInput)
	s.Output = ""
	x.applied(fmt.Sprintf("%s: %s revises", x.what, agent))
	resume(x.p, x.d, pending.Since, x.now)
}

// reply gives the agent that asked a person's reply, and the run goes on.
func reply(x *applying) {
	s := &x.d.Status
	x.record.Decision = v1alpha1.RecordReplied
	appendApproval(x.d, x.record, x.q.Reply)
	since := s.PendingInput.Since
	s.Input = x.q.Reply
	if x.q.Feedback != "" {
		s.Input += "\n\nFeedback: " + x.q.Feedback
	}
	s.Input = statusText(s.Input, maxInput)
	x.applied(fmt.Sprintf("%s: %s continues", x.what, s.CurrentAgent))
	resume(x.p, x.d, since, x.now)
}

// refuse says why a decision cannot be taken, if it cannot.
func refuse(p *Plan, s *v1alpha1.AgentRunStatus, q decisions.Queued, by string) (string, string, bool) {
	// People's values are bounded in characters, as they write them.
	tooLong := func(v string) bool { return utf8.RuneCountInString(v) > decisions.MaxValue }
	switch {
	case tooLong(q.Feedback) || tooLong(q.Reply) || len(q.Gate) > 200 || len(q.Revise) > 63:
		return fmt.Sprintf("a value is longer than %d characters", decisions.MaxValue), v1alpha1.ReasonInvalidValue, false
	case q.Action == decisions.Reply && s.Phase != v1alpha1.PhaseAwaitingInput:
		return fmt.Sprintf("the run is not waiting for input (phase %s)", s.Phase), v1alpha1.ReasonNotWaiting, false
	case q.Action == decisions.Reply && q.Reply == "":
		return "the reply is empty", v1alpha1.ReasonInvalidValue, false
	case q.Action == decisions.Reply:
		return "", "", true
	case q.Gate == "":
		return "the annotation names no gate", v1alpha1.ReasonInvalidValue, false
	case s.Phase != v1alpha1.PhaseAwaitingApproval || s.PendingApproval == nil:
		return fmt.Sprintf("the run is not waiting for approval (phase %s)", s.Phase), v1alpha1.ReasonNotWaiting, false
	case q.Gate != s.PendingApproval.Gate:
		return fmt.Sprintf("gate %s is not pending; the pending gate is %s", quoteName(q.Gate), s.PendingApproval.Gate), v1alpha1.ReasonGateNotPending, false
	case q.Action == decisions.Approve && slices.Contains(s.PendingApproval.ApprovedBy, by):
		g, _ := p.pendingGate(s)
		return fmt.Sprintf("%s already approved gate %s (%d of %d approvals); approvals must come from different people",
			by, q.Gate, len(s.PendingApproval.ApprovedBy), required(g)), v1alpha1.ReasonAlreadyApproved, false
	case q.Action == decisions.Approve && !heldInStep(*s.PendingApproval):
		if why, refused := p.selfApproval(q.Gate, by); refused {
			return why, v1alpha1.ReasonSelfApproval, false
		}
	case q.Action == decisions.Reject && q.Revise != "" && s.PendingApproval.Guard != nil:
		return fmt.Sprintf("gate %s holds a text a guardrail asked to review, which a rejection cannot send to another agent: reject it without revise and the text is blocked", q.Gate), v1alpha1.ReasonInvalidValue, false
	case q.Action == decisions.Reject && q.Revise != "" && s.PendingApproval.ToolCall != nil:
		return fmt.Sprintf("gate %s holds a tool call, which a rejection cannot send to another agent: reject it without revise and the agent is told", q.Gate), v1alpha1.ReasonInvalidValue, false
	case q.Action == decisions.Reject && q.Revise != "":
		if _, _, ok := reviser(p, q.Revise); !ok {
			return fmt.Sprintf("revise=%s names no agent that can take over (use an agent's name or replan)", quoteName(q.Revise)), v1alpha1.ReasonUnknownAgent, false
		}
	}
	return "", "", true
}

// reviser is the agent (and state) a rejection sends the run back to.
func reviser(p *Plan, revise string) (agent, state string, ok bool) {
	if revise == v1alpha1.ReviseReplan {
		agent, state = modes[p.Mode()].start(p)
		return agent, state, agent != ""
	}
	if p.Agent(revise) == nil {
		return "", "", false
	}
	if p.Mode() != v1alpha1.ModeStateMachine {
		return revise, revise, true
	}
	for _, st := range p.Spec.States {
		if st.Agent == revise {
			return revise, st.Name, true
		}
	}
	return "", "", false
}

func describeDecision(q decisions.Queued, by string) string {
	switch q.Action {
	case decisions.Reply:
		return fmt.Sprintf("reply by %s", by)
	case decisions.Reject:
		if q.Revise != "" {
			return fmt.Sprintf("reject=%s revise=%s by %s", quoteName(q.Gate), quoteName(q.Revise), by)
		}
	}
	return fmt.Sprintf("%s=%s by %s", q.Action, quoteName(q.Gate), by)
}

// maxApprovals is how many decisions status.approvals keeps.
const maxApprovals = 64

// appendApproval records a decision the update applies, in status and whole for the transcript.
func appendApproval(d *Update, r v1alpha1.ApprovalRecord, reply string) {
	s := &d.Status
	r.Feedback = statusText(r.Feedback, maxValue)
	d.Decided = append(d.Decided, Decided{ApprovalRecord: r, Reply: reply})
	s.Approvals = append(s.Approvals, r)
	if over := len(s.Approvals) - maxApprovals; over > 0 {
		s.Approvals = append([]v1alpha1.ApprovalRecord(nil), s.Approvals[over:]...)
	}
}

// CheckWaiting ends or passes a gate whose timeout expired.
func CheckWaiting(p *Plan, st v1alpha1.AgentRunStatus, now time.Time) (Update, bool) {
	deadline, ok := WaitDeadline(p, &st)
	if !ok || now.Before(deadline) {
		return Update{}, false
	}
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	g, _ := p.pendingGate(s)
	if g.OnTimeout == "Approve" {
		record := v1alpha1.ApprovalRecord{Gate: g.Name, Decision: v1alpha1.RecordTimedOut, By: v1alpha1.ByTimeout, Time: metav1.NewTime(now)}
		record.Step, record.ToolCall = heldAt(*s.PendingApproval)
		appendApproval(&d, record, "")
		msg := fmt.Sprintf("gate %s timed out after %s with nobody's decision (%d of %d approvals); its onTimeout: Approve lets the run go on",
			g.Name, g.Timeout.OrZero(), len(s.PendingApproval.ApprovedBy), required(g))
		setCondition(s, now, v1alpha1.ConditionDecision, metav1.ConditionTrue, v1alpha1.ReasonApplied, msg)
		d.event(EventNormal, EventDecisionApplied, "%s", msg)
		if !heldInStep(*s.PendingApproval) {
			// The next agent is told that nobody decided: never that someone approved.
			addContext(&d, "gate "+g.Name, ContextTimedOut, fmt.Sprintf(
				"Nobody decided at gate %s within its timeout of %s. The run went on because the gate's onTimeout is Approve: nobody approved it.",
				g.Name, g.Timeout.OrZero()))
		}
		passGate(p, &d, "", now)
		return d, true
	}
	since := s.PendingApproval.Since
	s.Waited = addWait(s.Waited, now.Sub(since.Time))
	msg := fmt.Sprintf("gate %s expired after %s with %d of %d approvals", g.Name, g.Timeout.OrZero(),
		len(s.PendingApproval.ApprovedBy), required(g))
	s.PendingApproval = nil
	end(&d, Trip{Reason: v1alpha1.ReasonApprovalExpired, Message: msg}, now)
	return d, true
}

// WaitDeadline is when the pending gate times out, if it has a timeout.
func WaitDeadline(p *Plan, st *v1alpha1.AgentRunStatus) (time.Time, bool) {
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.PendingApproval == nil {
		return time.Time{}, false
	}
	g, ok := p.pendingGate(st)
	if !ok || g.Timeout.OrZero() <= 0 {
		return time.Time{}, false
	}
	return st.PendingApproval.Since.Add(g.Timeout.OrZero()), true
}
