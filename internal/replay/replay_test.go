package replay

import (
	"errors"
	"fmt"
	"slices"
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

func plan(t testing.TB, c *ConfigWrapper) *workflow.Plan {
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

// lookups is the helpdesk whose billing agent looks invoices up with the crm tool.
func lookups() *ConfigWrapper {
	return MakeConfig("helpdesk", "ns").HTTPTool("crm", "http://crm.example").Agents(
		MakeAgent("triage").HandsOffTo("billing", "resolver"),
		MakeAgent("billing").HandsOffTo("triage").Tools(Uses("crm")),
		MakeAgent("resolver").Terminator(),
	)
}

// withLookups gives each of billing's recorded steps n calls of the crm tool, each after a
// model turn of 10 tokens, with the same arguments when same is set.
func withLookups(rec Recording, n int, same bool) Recording {
	rec.Steps = slices.Clone(rec.Steps)
	for i := range rec.Steps {
		s := &rec.Steps[i]
		if s.Result.Agent != "billing" {
			continue
		}
		s.Result.ToolCalls = int32(n)
		for c := range n {
			digest := fmt.Sprintf("args-%d-%d", i, c)
			if same {
				digest = "args"
			}
			s.Calls = append(s.Calls, workflow.RecordedCall{Server: "crm", Tool: "crm", Digest: digest, Tokens: int64(10 * (c + 1))})
		}
	}
	return rec
}

// A lower tool-call limit, a per-step limit or the repeated-call detector are guards the
// recorded calls go through again: the replay ends where the operator would have stopped the
// run, or stops where the agent would have been refused a call it made.
func TestAReplayPutsRecordedToolCallsThroughTheGuardsAgain(t *testing.T) {
	p := plan(t, lookups())
	rec := billingTicket(t, p)
	rec.End.ToolCalls = 6
	cases := map[string]struct {
		config  *ConfigWrapper
		rec     Recording
		reason  v1alpha1.TerminationReason
		stopped string
	}{
		"the same config": {config: lookups(), rec: withLookups(rec, 3, false), reason: v1alpha1.ReasonCompleted},
		"a run limit the second step passes": {config: lookups().MaxToolCalls(4), rec: withLookups(rec, 3, false),
			reason: v1alpha1.ReasonToolCallLimitExceeded},
		"repeated calls past the detector": {config: lookups().MaxRepeatedToolCalls(2), rec: withLookups(rec, 3, true),
			reason: v1alpha1.ReasonLoopDetected},
		"a step limit below the calls made": {config: MakeConfig("helpdesk", "ns").HTTPTool("crm", "http://crm.example").Agents(
			MakeAgent("triage").HandsOffTo("billing", "resolver"),
			MakeAgent("billing").HandsOffTo("triage").Tools(Uses("crm")).MaxToolCalls(2),
			MakeAgent("resolver").Terminator()), rec: withLookups(rec, 3, false),
			stopped: "step 2's call 3, of crm/crm, was made, and under the current config it is refused (this step's limit of 2 tool calls is reached"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := Run(plan(t, tc.config), tc.rec, Options{})
			switch {
			case tc.stopped != "":
				if !strings.HasPrefix(r.Stopped, tc.stopped) || r.Same() {
					t.Fatalf("stopped %q, want %q", r.Stopped, tc.stopped)
				}
			case r.Replayed.Reason != tc.reason || r.Stopped != "":
				t.Fatalf("replayed %s (%s), stopped %q; want %s", r.Replayed.Reason, r.Replayed.Message, r.Stopped, tc.reason)
			case tc.reason == v1alpha1.ReasonCompleted:
				if !r.Same() {
					t.Errorf("the same config did not reproduce the run: %+v", r)
				}
			default:
				if r.Same() || r.Diverged == 0 {
					t.Errorf("a run stopped by a guard was reported reproduced: diverged %d", r.Diverged)
				}
			}
		})
	}
	// The tripped step counts what its turns used up to the call that tripped.
	r := Run(plan(t, lookups().MaxToolCalls(4)), withLookups(rec, 3, false), Options{})
	if r.Replayed.Tokens != 100+100+100+20 {
		t.Errorf("tokens %d: want three whole steps and the 20 of step 4's turns before its second call", r.Replayed.Tokens)
	}
}

// A recorded call the current config would refuse for its own reason, or one refused then
// that it would make, cannot be replayed from the recording: the agent would have been told
// otherwise.
func TestARecordedRefusalIsKeptOnlyWhereTheConfigStillRefuses(t *testing.T) {
	p := plan(t, lookups())
	rec := billingTicket(t, p)
	rec.Steps[1].Calls = []workflow.RecordedCall{{Server: "crm", Tool: "crm", Digest: "a", Refused: true, Refusal: workflow.RefusalStepLimit}}
	r := Run(p, rec, Options{})
	if !strings.Contains(r.Stopped, "was refused (StepLimit), and under the current config it would be made") {
		t.Errorf("stopped %q", r.Stopped)
	}
	rec.Steps[1].Calls[0].Refusal = workflow.RefusalNotAllowed
	notAllowed := MakeConfig("helpdesk", "ns").HTTPTool("crm", "http://crm.example").Agents(
		MakeAgent("triage").HandsOffTo("billing", "resolver"),
		MakeAgent("billing").HandsOffTo("triage").Tools(Uses("crm").Allow("other")),
		MakeAgent("resolver").Terminator())
	if r := Run(plan(t, notAllowed), rec, Options{}); r.Stopped != "" {
		t.Errorf("a call refused then and now: stopped %q", r.Stopped)
	}
}

// A gate's timeout that comes, under the new config, before the recorded decision decides the
// gate first, as the operator would have found it.
func TestAGateTimeoutBeforeTheRecordedDecisionDecidesFirst(t *testing.T) {
	p := plan(t, helpdesk().Gate("refund", "billing", 1))
	rec := billingTicket(t, p) // bob approves a second after each gate opens
	r := Run(plan(t, helpdesk().Gate("refund", "billing", 1).GateTimeout("refund", 500*time.Millisecond, "Reject")), rec, Options{})
	if r.Replayed.Reason != v1alpha1.ReasonApprovalExpired || r.Same() {
		t.Fatalf("a 500ms timeout that rejects: replayed %s (%s), stopped %q", r.Replayed.Reason, r.Replayed.Message, r.Stopped)
	}
	if r := Run(plan(t, helpdesk().Gate("refund", "billing", 1).GateTimeout("refund", time.Hour, "Reject")), rec, Options{}); !r.Same() {
		t.Errorf("a timeout after the decision changes nothing: %+v", r)
	}
}

// A step that took longer than its agent may now take times out in the replay.
func TestARecordedStepPastANewAgentTimeoutTimesOut(t *testing.T) {
	p := plan(t, helpdesk())
	rec := billingTicket(t, p)
	for i := range rec.Steps {
		rec.Steps[i].Latency = 5 * time.Second
	}
	if r := Run(p, rec, Options{}); !r.Same() {
		t.Fatalf("on the same config: %+v", r)
	}
	r := Run(plan(t, helpdesk().AgentTimeout(2*time.Second)), rec, Options{})
	if r.Same() || r.Diverged != 1 || !strings.Contains(r.Replayed.Path[0].Reason, "timed out after 2s") {
		t.Fatalf("agentTimeout 2s: diverged at %d, replayed %s, path %+v", r.Diverged, r.Replayed.Reason, r.Replayed.Path)
	}
	// A step that timed out then, where the agent may now wait longer, has no recorded answer.
	rec.Steps[0].Result = workflow.StepResult{Agent: "triage", TimedOut: true, Error: "timed out after 5s"}
	r = Run(plan(t, helpdesk().AgentTimeout(time.Minute)), rec, Options{})
	if !strings.Contains(r.Stopped, "step 1 is triage's, whose recorded turn timed out after 5s") {
		t.Errorf("stopped %q", r.Stopped)
	}
}

// The cost is part of what a replay reproduces, and a replay with live turns reproduced
// nothing from the recording alone.
func TestSameComparesCostAndNoLiveTurns(t *testing.T) {
	r := Report{Recorded: Summary{Phase: v1alpha1.PhaseSucceeded, Cost: "0.50"}, Replayed: Summary{Phase: v1alpha1.PhaseSucceeded, Cost: "0.5"}}
	if !r.Same() {
		t.Errorf("0.50 and 0.5 are the same amount")
	}
	r.Replayed.Cost = "0.51"
	if r.Same() {
		t.Errorf("another cost is another run")
	}
	r.Replayed.Cost, r.Live = "0.50", []int32{3}
	if r.Same() {
		t.Errorf("a replay with a live turn was reported reproduced")
	}
}

// A run a guard ended at a tool call is ended there again where the guard still holds, and the
// replay stops where the new config would have made the call: nothing recorded its result.
func TestARecordedToolTripIsJudgedByTheNewConfig(t *testing.T) {
	p := plan(t, lookups().MaxToolCalls(4))
	tripped := workflow.Result{Output: "", Tokens: 20, ToolCalls: 1, Trip: &workflow.ToolTrip{Reason: v1alpha1.ReasonToolCallLimitExceeded,
		Message: "limits.maxToolCalls 4 reached", Call: &workflow.ToolUse{Server: "crm", Tool: "crm", Digest: "args-3-1", Step: 4}}}
	rec := record(t, p,
		answer("triage", "billing question", "billing"),
		answer("billing", "refund issued", "triage"),
		answer("triage", "one more", "billing"),
		turn{"billing", tripped},
	)
	rec = withLookups(rec, 3, false)
	rec.Steps[3].Calls = rec.Steps[3].Calls[:1]
	if rec.End.TerminationReason != v1alpha1.ReasonToolCallLimitExceeded {
		t.Fatalf("recorded %s", rec.End.TerminationReason)
	}
	if r := Run(p, rec, Options{}); !r.Same() {
		t.Fatalf("on the same config: replayed %s, stopped %q", r.Replayed.Reason, r.Stopped)
	}
	r := Run(plan(t, lookups().MaxToolCalls(10)), rec, Options{})
	if !strings.Contains(r.Stopped, "step 4's call of crm/crm ended the run (ToolCallLimitExceeded), and under the current config it would be made") {
		t.Errorf("a higher limit: stopped %q, replayed %s", r.Stopped, r.Replayed.Reason)
	}
}
