package workflow

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	. "github.com/baton-dev/baton/test/builders"
)

// pipeline: planner -> worker -> reporter (terminator), a plan gate after the planner and a
// final gate before completion.
func pipeline() *ConfigWrapper {
	return MakeConfig("pipeline", "ns").Agents(
		MakeAgent("planner").HandsOffTo("worker"),
		MakeAgent("worker").HandsOffTo("reporter"),
		MakeAgent("reporter").Terminator(),
	).Gate("plan", "planner", 1).Gate("final", "Complete", 1)
}

func gatedPlan(t *testing.T, c *ConfigWrapper) *Plan {
	return createdBy(t, c, "")
}

// createdBy is the plan of a run that creator created ("": the creator was not recorded).
func createdBy(t *testing.T, c *ConfigWrapper, creator string) *Plan {
	return mustPlan(t, c).ForRun("r", "ns", v1alpha1.ApprovalsRequired, creator)
}

func decision(seq int64, action, gate, by string) decisions.Queued {
	return decisions.Queued{Seq: seq, Action: action, Gate: gate, By: by}
}

// atPlanGate is the pipeline after the planner's step, waiting at the plan gate.
func atPlanGate(t *testing.T, p *Plan) v1alpha1.AgentRunStatus {
	st := Apply(p, started(p), StepResult{Agent: "planner", Input: "task", Result: turn{Output: "the plan", Handoff: "worker"}}, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.PendingApproval.Gate != "plan" || st.CurrentAgent != "worker" {
		t.Fatalf("not waiting at the plan gate: %s %+v", st.Phase, st.PendingApproval)
	}
	return st
}

func TestGatesOpenAndPass(t *testing.T) {
	p := gatedPlan(t, pipeline())
	st := atPlanGate(t, p)
	d := Decide(p, st, decision(1, "approve", "plan", "alice"), t0.Add(time.Minute))
	if d.Status.Phase != v1alpha1.PhaseRunning || d.Status.CurrentAgent != "worker" || d.Status.Input != "the plan" {
		t.Fatalf("approval should hand the plan to the worker: %s %s %q", d.Status.Phase, d.Status.CurrentAgent, d.Status.Input)
	}
	if d.Status.Waited.OrZero() != time.Minute || d.Status.LastDecision != 1 {
		t.Fatalf("waited %v, last decision %d", d.Status.Waited, d.Status.LastDecision)
	}
	if got := eventReasons(d); !cmp.Equal(got, []string{EventDecisionApplied}) || d.Events[0].Action != "Decision1" {
		t.Fatalf("events %v %+v", got, d.Events)
	}
	// The worker's step, then the reporter's final answer waits at the final gate.
	st = Apply(p, d.Status, StepResult{Agent: "worker", Input: "the plan", Result: turn{Output: "work", Handoff: "reporter"}}, t0.Add(2*time.Minute)).Status
	st = Apply(p, st, StepResult{Agent: "reporter", Input: "work", Result: turn{Output: "report"}}, t0.Add(3*time.Minute)).Status
	want := &v1alpha1.PendingApproval{Gate: "final", Since: metav1.NewMicroTime(t0.Add(3 * time.Minute)),
		Completes: &v1alpha1.Completion{Reason: v1alpha1.ReasonCompleted, Message: "terminator reporter gave the final answer at step 3"}}
	if diff := cmp.Diff(want, st.PendingApproval); diff != "" || st.Output != "report" {
		t.Fatalf("final gate (-want +got):\n%s output %q", diff, st.Output)
	}
	d = Decide(p, st, decision(2, "approve", "final", "bob"), t0.Add(4*time.Minute))
	if d.Status.TerminationReason != v1alpha1.ReasonCompleted || d.Status.Waited.OrZero() != 2*time.Minute {
		t.Fatalf("want Completed after waiting 2m in all, got %s, waited %v", d.Status.TerminationReason, d.Status.Waited)
	}
	if len(d.Status.Approvals) != 2 || d.Status.Approvals[1].By != "bob" {
		t.Fatalf("approvals: %+v", d.Status.Approvals)
	}
}

func TestRejections(t *testing.T) {
	cases := map[string]struct {
		revise string
		agent  string
		ended  v1alpha1.TerminationReason
	}{
		"without revise the run ends Rejected":   {revise: "", ended: v1alpha1.ReasonRejected},
		"revise=replan goes back to the planner": {revise: "replan", agent: "planner"},
		"revise=<agent> goes back to that agent": {revise: "worker", agent: "worker"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := gatedPlan(t, pipeline())
			q := decision(1, "reject", "plan", "alice")
			q.Revise, q.Feedback = tc.revise, "too broad"
			d := Decide(p, atPlanGate(t, p), q, t0)
			s := d.Status
			if s.TerminationReason != tc.ended || (tc.agent != "" && (s.Phase != v1alpha1.PhaseRunning || s.CurrentAgent != tc.agent)) {
				t.Fatalf("got %s %s %s", s.Phase, s.TerminationReason, s.CurrentAgent)
			}
			if tc.agent != "" && s.Input != "Rejected at gate plan by alice. Feedback: too broad\n\nEarlier output:\nthe plan" {
				t.Fatalf("the reviser's input: %q", s.Input)
			}
			if tc.ended != "" && s.TerminationMessage != "gate plan rejected by alice: too broad" {
				t.Fatalf("message %q", s.TerminationMessage)
			}
			if r := s.Approvals[0]; r.Decision != v1alpha1.RecordRejected || r.Revise != tc.revise || r.Feedback != "too broad" {
				t.Fatalf("record %+v", r)
			}
		})
	}
}

func TestBadDecisionsChangeNothingButSayWhy(t *testing.T) {
	quorum := pipeline()
	quorum.Spec.Approvals[0].Required = 2
	dutiesApart := pipeline().AllowSelfApproval("plan", false)
	cases := map[string]struct {
		config  *ConfigWrapper
		creator string
		prior   []decisions.Queued
		q       decisions.Queued
		reason  string
		msg     string
	}{
		"a gate that is not pending": {q: decision(1, "approve", "final", "alice"), reason: v1alpha1.ReasonGateNotPending,
			msg: "approve=final by alice changed nothing: gate final is not pending; the pending gate is plan"},
		"a reply when no one asked": {q: decisions.Queued{Seq: 1, Action: "reply", Reply: "yes", By: "alice"}, reason: v1alpha1.ReasonNotWaiting,
			msg: "reply by alice changed nothing: the run is not waiting for input (phase AwaitingApproval)"},
		"an empty gate name": {q: decision(1, "approve", "", "alice"), reason: v1alpha1.ReasonInvalidValue,
			msg: `approve="" by alice changed nothing: the annotation names no gate`},
		"an oversized feedback": {q: decisions.Queued{Seq: 1, Action: "approve", Gate: "plan", By: "alice", Feedback: string(make([]byte, 4097))},
			reason: v1alpha1.ReasonInvalidValue, msg: "approve=plan by alice changed nothing: a value is longer than 4096 characters"},
		"a revise to an unknown agent": {q: decisions.Queued{Seq: 1, Action: "reject", Gate: "plan", Revise: "ghost", By: "alice"},
			reason: v1alpha1.ReasonUnknownAgent, msg: "reject=plan revise=ghost by alice changed nothing: revise=ghost names no agent that can take over (use an agent's name or replan)"},
		"the same person twice towards a quorum": {config: quorum, prior: []decisions.Queued{decision(1, "approve", "plan", "alice")},
			q: decision(2, "approve", "plan", "alice"), reason: v1alpha1.ReasonAlreadyApproved,
			msg: "approve=plan by alice changed nothing: alice already approved gate plan (1 of 2 approvals); approvals must come from different people"},
		"the run's creator approving a gate that needs another approver": {config: dutiesApart, creator: "alice",
			q: decision(1, "approve", "plan", "alice"), reason: v1alpha1.ReasonSelfApproval,
			msg: "approve=plan by alice changed nothing: alice created this run, and gate plan needs an approver other than the run's creator (allowSelfApproval: false)"},
		"an approval at a gate that needs another approver when the creator was not recorded": {config: dutiesApart,
			q: decision(1, "approve", "plan", "bob"), reason: v1alpha1.ReasonSelfApproval,
			msg: "approve=plan by bob changed nothing: the run's creator was not recorded (it was created without Baton's admission webhook), so gate plan, which needs an approver other than the run's creator (allowSelfApproval: false), cannot be approved: reject it or let it time out"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := tc.config
			if cfg == nil {
				cfg = pipeline()
			}
			p := createdBy(t, cfg, tc.creator)
			st := atPlanGate(t, p)
			for _, q := range tc.prior {
				st = Decide(p, st, q, t0).Status
			}
			d := Decide(p, st, tc.q, t0)
			got := d.Status.DeepCopy()
			cond := conditionOf(*got, v1alpha1.ConditionDecision)
			if cond == nil || cond.Reason != tc.reason || cond.Message != tc.msg || string(cond.Status) != "False" {
				t.Fatalf("Decision condition %+v, want %s %q", cond, tc.reason, tc.msg)
			}
			if len(d.Events) != 1 || d.Events[0].Reason != EventDecisionIgnored || d.Events[0].Message != tc.msg {
				t.Fatalf("events %+v", d.Events)
			}
			// Nothing else moved but the decision's sequence number.
			got.Conditions, got.LastDecision = st.Conditions, st.LastDecision
			if diff := cmp.Diff(st, *got); diff != "" {
				t.Fatalf("the run changed (-before +after):\n%s", diff)
			}
			if d.Status.LastDecision != tc.q.Seq {
				t.Fatalf("last decision %d, want %d", d.Status.LastDecision, tc.q.Seq)
			}
		})
	}
}

// TestSelfApproval checks separation of duties at a gate: with allowSelfApproval: false the
// run's creator may not approve, but may still reject or send the run back, and everyone else
// approves as at any gate; without it the creator approves like anyone.
func TestSelfApproval(t *testing.T) {
	cases := map[string]struct {
		allow     *bool // the plan gate's allowSelfApproval
		required  int32
		decisions []decisions.Queued
		phase     v1alpha1.RunPhase
		reason    v1alpha1.TerminationReason
		agent     string   // who has control after the decisions, while running
		approvals []string // status.approvals as "decision by"
		refused   string   // the Decision condition's reason, when the last decision was refused
	}{
		"another person passes the gate": {
			allow: ptr.To(false), decisions: []decisions.Queued{decision(1, decisions.Approve, "plan", "bob")},
			phase: v1alpha1.PhaseRunning, agent: "worker", approvals: []string{"Approved bob"},
		},
		"the creator is refused and another person then passes the gate": {
			allow: ptr.To(false), decisions: []decisions.Queued{decision(1, decisions.Approve, "plan", "alice"), decision(2, decisions.Approve, "plan", "bob")},
			phase: v1alpha1.PhaseRunning, agent: "worker", approvals: []string{"Approved bob"},
		},
		"the creator's approval does not count towards a quorum": {
			allow: ptr.To(false), required: 2,
			decisions: []decisions.Queued{decision(1, decisions.Approve, "plan", "bob"), decision(2, decisions.Approve, "plan", "alice")},
			phase:     v1alpha1.PhaseAwaitingApproval, approvals: []string{"Approved bob"}, refused: v1alpha1.ReasonSelfApproval,
		},
		"the creator may reject": {
			allow: ptr.To(false), decisions: []decisions.Queued{decision(1, decisions.Reject, "plan", "alice")},
			phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonRejected, approvals: []string{"Rejected alice"},
		},
		"the creator may send the run back": {
			allow: ptr.To(false), decisions: []decisions.Queued{{Seq: 1, Action: decisions.Reject, Gate: "plan", Revise: "replan", By: "alice"}},
			phase: v1alpha1.PhaseRunning, agent: "planner", approvals: []string{"Rejected alice"},
		},
		"the creator approves a gate without the field": {
			decisions: []decisions.Queued{decision(1, decisions.Approve, "plan", "alice")},
			phase:     v1alpha1.PhaseRunning, agent: "worker", approvals: []string{"Approved alice"},
		},
		"the creator approves a gate that allows it": {
			allow: ptr.To(true), decisions: []decisions.Queued{decision(1, decisions.Approve, "plan", "alice")},
			phase: v1alpha1.PhaseRunning, agent: "worker", approvals: []string{"Approved alice"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := pipeline()
			c.Spec.Approvals[0].AllowSelfApproval = tc.allow
			c.Spec.Approvals[0].Required = max(tc.required, 1)
			p := createdBy(t, c, "alice")
			st := DecideAll(p, atPlanGate(t, p), tc.decisions, t0).Status
			if st.Phase != tc.phase || st.TerminationReason != tc.reason || (tc.agent != "" && st.CurrentAgent != tc.agent) {
				t.Fatalf("phase %s reason %q agent %s, want %s %q %s", st.Phase, st.TerminationReason, st.CurrentAgent, tc.phase, tc.reason, tc.agent)
			}
			expectDecided(t, st, tc.approvals, tc.refused)
		})
	}
}

// TestAGateSaysWhoMayApprove checks that the Event of a gate that needs an approver other than
// the run's creator says so when it opens, before anyone tries.
func TestAGateSaysWhoMayApprove(t *testing.T) {
	cases := map[string]struct {
		allow   *bool
		creator string
		want    string
	}{
		"any approver":         {creator: "alice", want: "waiting at gate plan for 1 approval(s). Approve:"},
		"not the creator":      {allow: ptr.To(false), creator: "alice", want: "waiting at gate plan for 1 approval(s) from people other than alice, who created the run. Approve:"},
		"creator not recorded": {allow: ptr.To(false), want: "waiting at gate plan for 1 approval(s) (the run's creator was not recorded, so no approval can pass this gate: reject it or let it time out). Approve:"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := pipeline()
			c.Spec.Approvals[0].AllowSelfApproval = tc.allow
			p := createdBy(t, c, tc.creator)
			d := Apply(p, started(p), StepResult{Agent: "planner", Input: "task", Result: turn{Output: "the plan", Handoff: "worker"}}, t0)
			if len(d.Events) == 0 || !strings.HasPrefix(d.Events[len(d.Events)-1].Message, tc.want) {
				t.Fatalf("events %+v, want one that starts %q", d.Events, tc.want)
			}
		})
	}
}

func TestGateTimeouts(t *testing.T) {
	for _, onTimeout := range []string{"Reject", "Approve"} {
		t.Run(onTimeout, func(t *testing.T) {
			p := gatedPlan(t, pipeline().GateTimeout("plan", time.Hour, onTimeout))
			st := atPlanGate(t, p)
			if at, ok := Deadline(p, &st); !ok || !at.Equal(t0.Add(time.Hour)) {
				t.Fatalf("deadline %v %v", at, ok)
			}
			if e := st.PendingApproval.Expires; e == nil || !e.Time.Equal(t0.Add(time.Hour)) {
				t.Fatalf("status.pendingApproval.expires %v, want the gate's opening plus its hour", e)
			}
			if _, expired := CheckWaiting(p, st, t0.Add(59*time.Minute)); expired {
				t.Fatal("expired early")
			}
			d, expired := CheckWaiting(p, st, t0.Add(time.Hour))
			if !expired {
				t.Fatal("did not expire")
			}
			switch onTimeout {
			case "Reject":
				if d.Status.TerminationReason != v1alpha1.ReasonApprovalExpired ||
					d.Status.TerminationMessage != "gate plan expired after 1h0m0s with 0 of 1 approvals" {
					t.Fatalf("got %s: %s", d.Status.TerminationReason, d.Status.TerminationMessage)
				}
			case "Approve":
				// The timeout says so: recorded TimedOut, never Approved, and the next agent is
				// told that nobody decided.
				if d.Status.Phase != v1alpha1.PhaseRunning || d.Status.Approvals[0].By != v1alpha1.ByTimeout ||
					d.Status.Approvals[0].Decision != v1alpha1.RecordTimedOut {
					t.Fatalf("got %s %+v", d.Status.Phase, d.Status.Approvals)
				}
				if len(d.Context) != 1 || d.Context[0].Kind != ContextTimedOut || !strings.Contains(d.Context[0].Text, "nobody approved it") {
					t.Fatalf("the next agent is told %+v", d.Context)
				}
				if msg := d.Events[len(d.Events)-1].Message; strings.Contains(msg, "approved") {
					t.Errorf("the Event says %q: a timeout approves nothing", msg)
				}
			}
		})
	}
}

func TestWaitingDoesNotCountAgainstTheTimeout(t *testing.T) {
	p := gatedPlan(t, pipeline().Timeout(10*time.Minute))
	st := atPlanGate(t, p)
	if _, ok := Deadline(p, &st); ok {
		t.Fatal("a waiting run has no run deadline")
	}
	st = Decide(p, st, decision(1, "approve", "plan", "alice"), t0.Add(3*time.Hour)).Status
	if at, _ := Deadline(p, &st); !at.Equal(t0.Add(3*time.Hour + 10*time.Minute)) {
		t.Fatalf("deadline %v, want start + timeout + 3h waited", at)
	}
	if _, tripped := Check(p, st, t0.Add(3*time.Hour+5*time.Minute)); tripped {
		t.Fatal("timed out counting the wait")
	}
}

func TestAwaitInputAndReply(t *testing.T) {
	p := gatedPlan(t, MakeConfig("ask", "ns").Agents(MakeAgent("support").Terminator()).Signal("ASK", v1alpha1.ActionAwaitInput))
	st := Apply(p, started(p), StepResult{Agent: "support", Input: "help", Result: turn{Output: "Which cluster?\nASK"}}, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingInput || st.PendingInput.Question != "Which cluster?\nASK" || st.PendingInput.Agent != "support" {
		t.Fatalf("not waiting for input: %s %+v", st.Phase, st.PendingInput)
	}
	d := Decide(p, st, decisions.Queued{Seq: 1, Action: "reply", Reply: "prod-east", By: "carol"}, t0.Add(time.Minute))
	if d.Status.Phase != v1alpha1.PhaseRunning || d.Status.CurrentAgent != "support" || d.Status.Input != "prod-east" || d.Status.PendingInput != nil {
		t.Fatalf("reply did not resume the agent: %+v", d.Status)
	}
	empty := Decide(p, st, decisions.Queued{Seq: 2, Action: "reply", By: "carol"}, t0)
	if c := conditionOf(empty.Status, v1alpha1.ConditionDecision); c.Reason != v1alpha1.ReasonInvalidValue || empty.Status.Phase != v1alpha1.PhaseAwaitingInput {
		t.Fatalf("an empty reply was taken: %+v", c)
	}
}

// TestAnAgentThatAsksForInputWaitsForAReplyWithoutASignal checks a remote agent's question (an
// A2A task in input-required): no signal is declared, the schema is not applied to a question,
// and the reply goes back to the agent that asked, with the task it keeps open recorded.
func TestAnAgentThatAsksForInputWaitsForAReplyWithoutASignal(t *testing.T) {
	cfg := MakeConfig("ask", "ns").Agents(MakeAgent("support").Terminator())
	obj := cfg.Obj()
	obj.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["answer"]}`)}
	p, errs := NewPlan(obj.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	d := Apply(p, started(p), StepResult{Agent: "support", Input: "help", Result: turn{Output: "Which cluster?", InputRequired: true, RemoteTask: "task-7"}}, t0)
	st := d.Status
	if st.Phase != v1alpha1.PhaseAwaitingInput || st.PendingInput.Question != "Which cluster?" || st.PendingInput.Agent != "support" {
		t.Fatalf("not waiting for input: %s %+v", st.Phase, st.PendingInput)
	}
	last := st.HandoffSequence[len(st.HandoffSequence)-1]
	if last.Outcome != v1alpha1.OutcomeSignal || last.Reason != ReasonInputRequired || st.ErrorCount != 0 {
		t.Errorf("the step's record: %+v, errors %d", last, st.ErrorCount)
	}
	r := Decide(p, st, decisions.Queued{Seq: 1, Action: "reply", Reply: "prod-east", By: "carol"}, t0.Add(time.Minute))
	if r.Status.Phase != v1alpha1.PhaseRunning || r.Status.CurrentAgent != "support" || r.Status.Input != "prod-east" {
		t.Fatalf("reply did not resume the agent: %+v", r.Status)
	}
}

func TestSkipApprovals(t *testing.T) {
	p := mustPlan(t, pipeline()).ForRun("r", "ns", v1alpha1.ApprovalsSkip, "")
	st := Apply(p, started(p), StepResult{Agent: "planner", Input: "task", Result: turn{Output: "plan", Handoff: "worker"}}, t0).Status
	if st.Phase != v1alpha1.PhaseRunning {
		t.Fatalf("a gate opened for a run that skips them: %s", st.Phase)
	}
}

// TestSkipKeepsGatesThatNeedSomeoneElse checks that the person who starts a run cannot pass a
// gate that needs another approver by starting it with approvals: Skip.
func TestSkipKeepsGatesThatNeedSomeoneElse(t *testing.T) {
	p := mustPlan(t, pipeline().AllowSelfApproval("plan", false)).ForRun("r", "ns", v1alpha1.ApprovalsSkip, "alice")
	st := Apply(p, started(p), StepResult{Agent: "planner", Input: "task", Result: turn{Output: "plan", Handoff: "worker"}}, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.PendingApproval == nil || st.PendingApproval.Gate != "plan" {
		t.Fatalf("approvals: Skip passed a gate with allowSelfApproval: false: %s %+v", st.Phase, st.PendingApproval)
	}
}

func conditionOf(st v1alpha1.AgentRunStatus, typ string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// TestWaitedIsWholeSeconds checks that the time a run waited for people is kept in whole
// seconds, as kubectl describe prints it.
func TestWaitedIsWholeSeconds(t *testing.T) {
	p := gatedPlan(t, pipeline())
	st := atPlanGate(t, p)
	d := Decide(p, st, decision(1, decisions.Approve, "plan", "alice"), t0.Add(time.Minute+2745*time.Millisecond))
	if d.Status.Waited == nil || *d.Status.Waited != "1m3s" {
		t.Fatalf("waited %v, want 1m3s", d.Status.Waited)
	}
}

// TestDecisionsAreJudgedWhenTheyWereMade checks the rule between a gate's timeout and a
// person's decision that reaches the operator late: the decision counts as of the time it was
// made, so one made before the timeout wins, and one made after it finds the gate timed out.
func TestDecisionsAreJudgedWhenTheyWereMade(t *testing.T) {
	made := func(seq int64, action, by string, at time.Duration) decisions.Queued {
		q := decision(seq, action, "plan", by)
		q.Time = metav1.NewTime(t0.Add(at))
		return q
	}
	now := t0.Add(3 * time.Hour) // the operator takes the decisions long after the gate's hour
	cases := map[string]struct {
		onTimeout string
		queue     []decisions.Queued
		phase     v1alpha1.RunPhase
		reason    v1alpha1.TerminationReason
		approvals []string // status.approvals as "decision by"
		refused   string   // the Decision condition's reason, when the last decision was refused
	}{
		"an approval made before the timeout is applied": {
			onTimeout: "Reject",
			queue:     []decisions.Queued{made(1, decisions.Approve, "alice", 30*time.Minute)},
			phase:     v1alpha1.PhaseRunning,
			approvals: []string{"Approved alice"},
		},
		"an approval made after a rejecting timeout is too late": {
			onTimeout: "Reject",
			queue:     []decisions.Queued{made(1, decisions.Approve, "alice", 90*time.Minute)},
			phase:     v1alpha1.PhaseFailed,
			reason:    v1alpha1.ReasonApprovalExpired,
		},
		"a rejection made before an approving timeout is applied": {
			onTimeout: "Approve",
			queue:     []decisions.Queued{made(1, decisions.Reject, "bob", 59*time.Minute)},
			phase:     v1alpha1.PhaseFailed,
			reason:    v1alpha1.ReasonRejected,
			approvals: []string{"Rejected bob"},
		},
		"a rejection made after an approving timeout finds the gate passed": {
			onTimeout: "Approve",
			queue:     []decisions.Queued{made(1, decisions.Reject, "bob", 61*time.Minute)},
			phase:     v1alpha1.PhaseRunning,
			approvals: []string{"TimedOut timeout"},
			refused:   v1alpha1.ReasonNotWaiting,
		},
		"a decision with no time is judged now": {
			onTimeout: "Approve",
			queue:     []decisions.Queued{decision(1, decisions.Reject, "plan", "bob")},
			phase:     v1alpha1.PhaseFailed,
			reason:    v1alpha1.ReasonRejected,
			approvals: []string{"Rejected bob"},
		},
		"decisions in order, each at its own time": {
			onTimeout: "Reject",
			queue: []decisions.Queued{
				made(1, decisions.Approve, "alice", 10*time.Minute),
				made(2, decisions.Approve, "bob", 20*time.Minute),
			},
			phase:     v1alpha1.PhaseRunning,
			approvals: []string{"Approved alice", "Approved bob"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := pipeline().GateTimeout("plan", time.Hour, tc.onTimeout)
			c.Spec.Approvals[0].Required = int32(len(tc.queue)) // every approval counts
			p := gatedPlan(t, c)
			u := DecideAll(p, atPlanGate(t, p), tc.queue, now)
			st := u.Status
			if st.Phase != tc.phase || st.TerminationReason != tc.reason {
				t.Fatalf("phase %s reason %q (%s), want %s %q", st.Phase, st.TerminationReason, st.TerminationMessage, tc.phase, tc.reason)
			}
			expectDecided(t, st, tc.approvals, tc.refused)
			if !st.Phase.Terminal() && st.LastDecision != tc.queue[len(tc.queue)-1].Seq {
				t.Fatalf("last decision %d: every queued decision is taken, applied or refused", st.LastDecision)
			}
		})
	}
}

// expectDecided checks the decisions in status.approvals, as "decision by", and, when refused
// is set, that the latest decision was refused for that reason.
func expectDecided(t *testing.T, st v1alpha1.AgentRunStatus, approvals []string, refused string) {
	t.Helper()
	var got []string
	for _, a := range st.Approvals {
		got = append(got, a.Decision+" "+a.By)
	}
	if diff := cmp.Diff(approvals, got); diff != "" {
		t.Fatalf("approvals (-want +got):\n%s", diff)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDecision); refused != "" && (c == nil || c.Reason != refused) {
		t.Fatalf("Decision condition %+v, want reason %s", c, refused)
	}
}

// TestAnEndedRunWaitsForNoOne checks that a run cancelled at a gate no longer shows the gate as
// pending, and counts the time it waited there.
func TestAnEndedRunWaitsForNoOne(t *testing.T) {
	p := gatedPlan(t, pipeline())
	st := Cancel(atPlanGate(t, p), "not needed", t0.Add(90*time.Second)).Status
	if st.PendingApproval != nil || st.Waited == nil || *st.Waited != "1m30s" {
		t.Fatalf("cancelled at the gate: pending %+v, waited %v; want none pending and 1m30s waited", st.PendingApproval, st.Waited)
	}
}
