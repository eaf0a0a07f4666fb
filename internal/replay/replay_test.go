package replay

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

var t0 = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// helpdesk is a Swarm: triage hands billing questions to billing and back, and the resolver
// closes the ticket.
func helpdesk() *ConfigWrapper {
	return MakeConfig("helpdesk", "ns").Agents(
		MakeAgent("triage").HandsOffTo("billing", "resolver"),
		MakeAgent("billing").HandsOffTo("triage"),
		MakeAgent("resolver").Terminator(),
	)
}

func plan(t *testing.T, c *ConfigWrapper) *workflow.Plan {
	t.Helper()
	p, errs := workflow.NewPlan(c.Obj().Spec, nil)
	if len(errs) > 0 {
		t.Fatalf("NewPlan: %v", errs)
	}
	return p.ForRun("ticket", "ns", "", "alice")
}

// turn is one agent's answer, as the recording holds it.
type turn struct {
	agent string
	workflow.Result
}

// answer is one recorded turn: the agent's answer and where it hands off.
func answer(agent, output, to string) turn {
	return turn{agent, workflow.Result{Output: output, Handoff: to, Tokens: 100}}
}

// record runs the answers through the core on p, as the operator would have, approving each
// gate the run reaches as bob, and returns what the transcript would hold of it.
func record(t testing.TB, p *workflow.Plan, answers ...turn) Recording {
	t.Helper()
	rec := Recording{Run: "ticket", Input: "my invoice is wrong", Started: t0, Revision: "helpdesk-1"}
	st := workflow.Start(p, v1alpha1.AgentRunStatus{}, rec.Input, rec.Revision, t0).Status
	now := t0
	var path []v1alpha1.HandoffRecord
	for _, a := range answers {
		for st.Phase == v1alpha1.PhaseAwaitingApproval {
			now = now.Add(time.Second)
			d := workflow.Decided{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: st.PendingApproval.Gate, Decision: v1alpha1.RecordApproved,
				By: "bob", Time: metav1.NewTime(now)}}
			rec.Decisions = append(rec.Decisions, d)
			st = workflow.Decide(p, st, decisions.Queued{Seq: int64(len(rec.Decisions)), Action: decisions.Approve, Gate: d.Gate, By: "bob", Time: d.Time}, now).Status
		}
		if st.Phase != v1alpha1.PhaseRunning {
			t.Fatalf("recording: the run is %s before %s's answer", st.Phase, a.agent)
		}
		now = now.Add(time.Second)
		next := workflow.Next(p, &st)
		res := workflow.StepResult{Agent: next.Agent, Input: next.Input, Result: a.Result}
		if a.agent != next.Agent {
			t.Fatalf("recording: %s answers, but %s has control", a.agent, next.Agent)
		}
		rec.Steps = append(rec.Steps, workflow.RecordedStep{Result: res, Time: now})
		st = workflow.Apply(p, st, res, now).Status
		path = append(path, st.HandoffSequence[len(st.HandoffSequence)-1])
	}
	rec.Path, rec.End = path, st
	return rec
}

// billingTicket is a ticket that goes to billing twice, then to the resolver.
func billingTicket(t testing.TB, p *workflow.Plan) Recording {
	return record(t, p,
		answer("triage", "billing question", "billing"),
		answer("billing", "refund issued", "triage"),
		answer("triage", "one more", "billing"),
		answer("billing", "credit note sent", "triage"),
		answer("triage", "done", "resolver"),
		answer("resolver", "resolved: refund and credit note", ""),
	)
}

func pathOf(hs []v1alpha1.HandoffRecord) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.From+">"+h.To)
	}
	return strings.Join(s, " ")
}

func TestAReplayOnTheSameConfigReproducesTheRun(t *testing.T) {
	p := plan(t, helpdesk().Gate("refund", "billing", 1))
	rec := billingTicket(t, p)
	r := Run(p, rec, Options{})
	if !r.Same() {
		t.Fatalf("replay on the same config: diverged at %d, stopped %q; recorded %s %s %d, replayed %s %s %d",
			r.Diverged, r.Stopped, pathOf(r.Recorded.Path), r.Recorded.Reason, r.Recorded.Tokens, pathOf(r.Replayed.Path), r.Replayed.Reason, r.Replayed.Tokens)
	}
	if r.Replayed.Reason != v1alpha1.ReasonCompleted || r.Replayed.Tokens != 600 || len(r.Replayed.Path) != 6 {
		t.Errorf("replayed %s, %d tokens, path %s", r.Replayed.Reason, r.Replayed.Tokens, pathOf(r.Replayed.Path))
	}
}

func TestAReplayOnALowerLimitSaysWhereThePathEnds(t *testing.T) {
	rec := billingTicket(t, plan(t, helpdesk()))
	r := Run(plan(t, helpdesk().MaxHandoffs(3)), rec, Options{})
	if r.Replayed.Reason != v1alpha1.ReasonMaxHandoffsExceeded || r.Diverged != 4 || r.Stopped != "" {
		t.Fatalf("maxHandoffs 3: replayed %s (%s), diverged at %d, stopped %q", r.Replayed.Reason, r.Replayed.Message, r.Diverged, r.Stopped)
	}
	if got := pathOf(r.Replayed.Path); got != "triage>billing billing>triage triage>billing" {
		t.Errorf("replayed path %s", got)
	}
	if r.Recorded.Reason != v1alpha1.ReasonCompleted || r.Recorded.Tokens != 600 || r.Replayed.Tokens != 300 {
		t.Errorf("recorded %s %d tokens, replayed %d tokens", r.Recorded.Reason, r.Recorded.Tokens, r.Replayed.Tokens)
	}
}

func TestAReplayOnARemovedAgentStopsWhereItIsAskedFor(t *testing.T) {
	rec := billingTicket(t, plan(t, helpdesk()))
	without := MakeConfig("helpdesk", "ns").Agents(
		MakeAgent("triage").HandsOffTo("resolver"),
		MakeAgent("resolver").Terminator(),
	)
	r := Run(plan(t, without), rec, Options{})
	// Triage's recorded handoff to billing is refused now: the step fails, and triage, the
	// entrypoint, has no one to recover.
	if r.Diverged != 1 || r.Replayed.Reason != v1alpha1.ReasonTooManyErrors {
		t.Fatalf("billing removed: diverged at %d, replayed %s (%s), stopped %q", r.Diverged, r.Replayed.Reason, r.Replayed.Message, r.Stopped)
	}
	if !strings.Contains(r.Replayed.Path[0].Reason, "handoff to billing refused") {
		t.Errorf("first replayed record %+v; want the refused handoff", r.Replayed.Path[0])
	}
}

func TestAReplayStopsAtAnAddedGateNobodyDecided(t *testing.T) {
	rec := billingTicket(t, plan(t, helpdesk()))
	r := Run(plan(t, helpdesk().Gate("refund", "billing", 1)), rec, Options{})
	if r.Stopped != "after step 2 the run waits at gate refund, and the recording holds no decision of it that passes it" {
		t.Fatalf("stopped %q", r.Stopped)
	}
	if r.Replayed.Phase != v1alpha1.PhaseAwaitingApproval || r.Same() {
		t.Errorf("replayed %s; want it waiting at the gate, not the same run", r.Replayed.Phase)
	}
}

func TestAReplayHoldsRecordedApprovalsToTheNewRules(t *testing.T) {
	p := plan(t, helpdesk().Gate("refund", "billing", 1))
	rec := billingTicket(t, p)
	// Bob approved; now the gate needs two approvers: his approval is not enough.
	r := Run(plan(t, helpdesk().Gate("refund", "billing", 2)), rec, Options{})
	if r.Stopped == "" || !strings.Contains(r.Stopped, "gate refund") {
		t.Fatalf("a gate needing 2 with 1 recorded approval: stopped %q, replayed %s", r.Stopped, r.Replayed.Phase)
	}
}

func TestAReplayOnAChangedStateMachineTransitionDiverges(t *testing.T) {
	machine := func(afterBilling string) *ConfigWrapper {
		return MakeConfig("flow", "ns").Mode(v1alpha1.ModeStateMachine).Agents(
			MakeAgent("triage"), MakeAgent("billing"), MakeAgent("resolver"),
		).State("triaging", "triage", map[string]string{"BILLING": "billing-work"}).
			State("billing-work", "billing", map[string]string{"DONE": afterBilling}).
			State("resolving", "resolver", map[string]string{"DONE": "closed"}).
			State("reviewing", "triage", map[string]string{"DONE": "closed"}).
			State("closed", "", nil).
			Signal("BILLING", v1alpha1.ActionNone).Signal("DONE", v1alpha1.ActionNone)
	}
	signal := func(agent, sig string) turn {
		return turn{agent, workflow.Result{Output: agent + " says " + sig, Signal: sig, Tokens: 10}}
	}
	rec := record(t, plan(t, machine("resolving")), signal("triage", "BILLING"), signal("billing", "DONE"), signal("resolver", "DONE"))
	r := Run(plan(t, machine("reviewing")), rec, Options{})
	if r.Diverged != 2 {
		t.Fatalf("billing's DONE now goes to reviewing: diverged at %d; recorded %s, replayed %s", r.Diverged, pathOf(r.Recorded.Path), pathOf(r.Replayed.Path))
	}
	if r.Stopped == "" {
		t.Errorf("the reviewing triage took a turn nobody recorded: replayed %s", pathOf(r.Replayed.Path))
	}
}

func TestAReplayOfATimeoutTripsWhereTheRecordSays(t *testing.T) {
	rec := billingTicket(t, plan(t, helpdesk()))
	// The recorded steps end a second apart: a 3 s timeout passes during step 3.
	r := Run(plan(t, helpdesk().Timeout(3*time.Second)), rec, Options{})
	if r.Replayed.Reason != v1alpha1.ReasonTimeout {
		t.Fatalf("timeout 3s: replayed %s (%s)", r.Replayed.Reason, r.Replayed.Message)
	}
}

func TestAReportSaysTheGatesReachedAndTheOutput(t *testing.T) {
	p := plan(t, helpdesk().Gate("refund", "billing", 1))
	r := Run(p, billingTicket(t, p), Options{})
	if strings.Join(r.Replayed.Gates, ",") != "refund" || r.Replayed.Output != "resolved: refund and credit note" {
		t.Errorf("gates %v, output %q", r.Replayed.Gates, r.Replayed.Output)
	}
	stopped := Run(plan(t, helpdesk().Gate("refund", "billing", 1).Gate("triaged", "triage", 1)), billingTicket(t, plan(t, helpdesk())), Options{})
	if strings.Join(stopped.Replayed.Gates, ",") != "triaged" {
		t.Errorf("a replay waiting at an added gate: gates %v", stopped.Replayed.Gates)
	}
}

func TestATurnTheRecordingLacksIsAnsweredLiveWithTheRunSoFar(t *testing.T) {
	// Recorded under maxHandoffs 2, the run ended at its limit; replayed with the default, the
	// recording runs out at step 3, and Live answers the steps after it.
	rec := billingTicket(t, plan(t, helpdesk()))
	rec.Steps = rec.Steps[:2]
	var asked []LiveTurn
	live := func(lt LiveTurn) (workflow.StepResult, error) {
		asked = append(asked, lt)
		if lt.Step.Agent == "triage" {
			return workflow.StepResult{Result: workflow.Result{Output: "closing", Handoff: "resolver", Tokens: 7}}, nil
		}
		return workflow.StepResult{Result: workflow.Result{Output: "resolved live", Tokens: 5}}, nil
	}
	r := Run(plan(t, helpdesk()), rec, Options{Live: live})
	if r.Stopped != "" || r.Replayed.Reason != v1alpha1.ReasonCompleted || r.Replayed.Output != "resolved live" {
		t.Fatalf("replayed %+v, stopped %q", r.Replayed, r.Stopped)
	}
	if got := pathOf(r.Replayed.Path); got != "triage>billing billing>triage triage>resolver resolver>" {
		t.Errorf("replayed path %s", got)
	}
	if len(r.Live) != 2 || r.Live[0] != 3 || r.Live[1] != 4 || r.Diverged != 3 {
		t.Errorf("live steps %v, diverged at %d", r.Live, r.Diverged)
	}
	if r.Replayed.Tokens != 212 {
		t.Errorf("tokens %d: want the two recorded turns' 200 and the live turns' 12", r.Replayed.Tokens)
	}
	// The live turn is shown what the replayed run said before it, oldest first.
	var said []string
	for _, c := range asked[0].Context {
		said = append(said, c.Text)
	}
	if strings.Join(said, "|") != "billing question|refund issued" || asked[0].From.StepCount != 2 || !asked[0].Now.Equal(rec.Steps[1].Time) {
		t.Errorf("the first live turn was shown %q, at step count %d and time %v", said, asked[0].From.StepCount, asked[0].Now)
	}
}

func TestALiveTurnThatCannotBeAnsweredStopsTheReplaySayingWhy(t *testing.T) {
	rec := billingTicket(t, plan(t, helpdesk()))
	rec.Steps = rec.Steps[:1]
	r := Run(plan(t, helpdesk()), rec, Options{Live: func(LiveTurn) (workflow.StepResult, error) {
		return workflow.StepResult{}, errors.New("no API key for model endpoint openai")
	}})
	if r.Stopped != "step 2 is billing's, answered live: no API key for model endpoint openai" || len(r.Live) != 0 {
		t.Errorf("stopped %q, live %v", r.Stopped, r.Live)
	}
}

func TestLiveTurnsAreBounded(t *testing.T) {
	rec := billingTicket(t, plan(t, helpdesk()))
	rec.Steps = rec.Steps[:1]
	calls := 0
	bounce := func(lt LiveTurn) (workflow.StepResult, error) {
		calls++
		to := "triage"
		if lt.Step.Agent == "triage" {
			to = "billing"
		}
		return workflow.StepResult{Result: workflow.Result{Output: fmt.Sprintf("turn %d", calls), Handoff: to}}, nil
	}
	r := Run(plan(t, helpdesk().MaxHandoffs(1000)), rec, Options{Live: bounce, MaxLive: 3})
	if calls > 3 || len(r.Live) > 3 {
		t.Errorf("%d live calls, %d reported, with MaxLive 3", calls, len(r.Live))
	}
	if r.Stopped == "" && !r.Replayed.Phase.Terminal() {
		t.Errorf("the replay neither stopped nor ended: %+v", r.Replayed)
	}
}

func TestTheGatesReachedAreReadFromEveryDecisionNotTheStatussLatest(t *testing.T) {
	p := plan(t, helpdesk().Gate("refund", "billing", 1))
	rec := billingTicket(t, p)
	rec.End.Approvals = nil // status.approvals keeps the latest only
	r := Run(p, rec, Options{})
	if strings.Join(r.Recorded.Gates, ",") != "refund" || strings.Join(r.Replayed.Gates, ",") != "refund" {
		t.Errorf("recorded gates %v, replayed gates %v", r.Recorded.Gates, r.Replayed.Gates)
	}
}
