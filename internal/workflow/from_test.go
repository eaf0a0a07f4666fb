package workflow

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// recorded plays answers on a started run and returns the steps as a transcript holds them,
// and the status after each.
func recorded(t *testing.T, p *Plan, answers ...turn) ([]RecordedStep, []v1alpha1.AgentRunStatus) {
	t.Helper()
	st := started(p)
	var steps []RecordedStep
	var after []v1alpha1.AgentRunStatus
	for i, a := range answers {
		at := t0.Add(time.Duration(i+1) * time.Second)
		res := StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: a}
		steps = append(steps, RecordedStep{Result: res, Time: at})
		st = Apply(p, st, res, at).Status
		after = append(after, st)
	}
	return steps, after
}

// recording is a recorded run: its steps, and the decisions made after each (by step number).
type recording struct {
	steps []RecordedStep
	after map[int32][]Decided
}

// replay replays the first n steps of h on p, for a run the earlier run's creator made.
func (h recording) replay(p *Plan, earlierCreator string, n int) (v1alpha1.AgentRunStatus, error) {
	r := NewReplay(p, "earlier", earlierCreator, "task", "team-rev", t0)
	for i, s := range h.steps[:n] {
		step := int32(i + 1)
		if err := r.Step(step, s); err != nil {
			return v1alpha1.AgentRunStatus{}, err
		}
		for _, d := range h.after[step] {
			r.Decided(step, d)
		}
	}
	return r.Status()
}

func replayAll(p *Plan, steps []RecordedStep) (v1alpha1.AgentRunStatus, error) {
	return recording{steps: steps}.replay(p, "", len(steps))
}

func approved(gate, by string) Decided {
	return Decided{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: gate, Decision: v1alpha1.RecordApproved, By: by, Time: metav1.NewTime(t0)}}
}

func TestReplayRebuildsTheStatusAfterAStep(t *testing.T) {
	p := mustPlan(t, team().Allow(5, "lead", "worker"))
	steps, after := recorded(t, p, say("plan A", "worker"), say("did A", "lead"), say("plan B", "worker"), say("did B", "lead"))
	for n := 1; n <= len(steps); n++ {
		got, err := replayAll(p, steps[:n])
		if err != nil {
			t.Fatalf("after step %d: %v", n, err)
		}
		want := after[n-1]
		if got.StepCount != want.StepCount || got.HandoffCount != want.HandoffCount || got.CurrentAgent != want.CurrentAgent ||
			got.Input != want.Input || got.TokensUsed != want.TokensUsed || len(got.HandoffSequence) != len(want.HandoffSequence) {
			t.Fatalf("after step %d: got %+v, want %+v", n, got, want)
		}
	}

	replayed, err := replayAll(p, steps[:2])
	if err != nil {
		t.Fatal(err)
	}
	d := StartFrom(p, replayed, "try plan C", "team-rev2", "earlier", 2, t0.Add(time.Hour))
	s := d.Status
	if s.Phase != v1alpha1.PhaseRunning || s.StepCount != 2 || s.CurrentAgent != "lead" || s.Input != "try plan C" ||
		!s.StartTime.Time.Equal(t0.Add(time.Hour)) || s.HandoffSequence[1].To != "lead" || s.ConfigRevision != "team-rev2" {
		t.Fatalf("start from step 2: %+v", s)
	}
	if c := s.Conditions[0]; !strings.Contains(c.Message, "continuing run earlier after step 2") {
		t.Fatalf("condition %+v", c)
	}
}

// twoApprovers is the pipeline whose plan gate needs two approvals.
func twoApprovers() *ConfigWrapper {
	c := pipeline()
	c.Spec.Approvals[0].Required = 2
	return c
}

// gatedHistory is the pipeline run past its plan gate: planner, the gate, worker, reporter.
func gatedHistory(decided ...Decided) recording {
	return recording{
		steps: []RecordedStep{
			{Result: StepResult{Agent: "planner", Input: "task", Result: say("the plan", "worker")}, Time: t0},
			{Result: StepResult{Agent: "worker", Input: "the plan", Result: say("the work", "reporter")}, Time: t0.Add(time.Minute)},
		},
		after: map[int32][]Decided{1: decided},
	}
}

func TestAFromRunPassesAGateOnlyWhereTheTranscriptRecordsItApproved(t *testing.T) {
	cases := map[string]struct {
		config  *ConfigWrapper
		creator string
		earlier string
		decided []Decided
		refused string
	}{
		"an approval someone made passes the gate": {
			config: pipeline(), decided: []Decided{approved("plan", "bob")},
		},
		"no recorded approval: the replay stops at the gate": {
			config: pipeline(), refused: "after step 1 run earlier waited at gate plan, and its transcript records no approval of it",
		},
		"fewer approvals than the gate needs now": {
			config: twoApprovers(), decided: []Decided{approved("plan", "bob")},
			refused: "waited at gate plan",
		},
		"two approvals where the gate needs two": {
			config: twoApprovers(), decided: []Decided{approved("plan", "bob"), approved("plan", "carol")},
		},
		"the new run's creator approved a gate that needs someone else": {
			config: pipeline().AllowSelfApproval("plan", false), creator: "mallory", earlier: "alice",
			decided: []Decided{approved("plan", "mallory")},
			refused: "mallory created this run, and gate plan needs an approver other than the run's creator",
		},
		"the earlier run's creator approved a gate that needs someone else": {
			config: pipeline().AllowSelfApproval("plan", false), creator: "bob", earlier: "alice",
			decided: []Decided{approved("plan", "alice")},
			refused: "alice created the run this one continues",
		},
		"someone else approved a gate that needs someone else": {
			config: pipeline().AllowSelfApproval("plan", false), creator: "mallory", earlier: "alice",
			decided: []Decided{approved("plan", "bob")},
		},
		"an approval of another gate does not pass this one": {
			config: pipeline(), decided: []Decided{approved("final", "bob")}, refused: "gate final is not pending",
		},
		"a timeout that approves under the current config": {
			config:  pipeline().GateTimeout("plan", 30*time.Second, "Approve"),
			decided: []Decided{{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: "plan", Decision: v1alpha1.RecordApproved, By: v1alpha1.ByTimeout, Time: metav1.NewTime(t0.Add(30 * time.Second))}}},
		},
		"a timeout that no longer approves": {
			config:  pipeline().GateTimeout("plan", 30*time.Second, "Reject"),
			decided: []Decided{{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: "plan", Decision: v1alpha1.RecordApproved, By: v1alpha1.ByTimeout, Time: metav1.NewTime(t0.Add(30 * time.Second))}}},
			refused: "passed by its timeout in run earlier, and under the current config its timeout does not approve it then",
		},
		"an approval made after the gate now times out, and its timeout rejects": {
			config:  pipeline().GateTimeout("plan", 30*time.Second, "Reject"),
			decided: []Decided{{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: "plan", Decision: v1alpha1.RecordApproved, By: "bob", Time: metav1.NewTime(t0.Add(time.Minute))}}},
			refused: "step 2 does not follow: the run was Failed after step 1",
		},
		"a timeout that came sooner than the current timeout": {
			config:  pipeline().GateTimeout("plan", time.Hour, "Approve"),
			decided: []Decided{{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: "plan", Decision: v1alpha1.RecordApproved, By: v1alpha1.ByTimeout, Time: metav1.NewTime(t0.Add(30 * time.Second))}}},
			refused: "its timeout does not approve it then",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := createdBy(t, tc.config, tc.creator)
			st, err := gatedHistory(tc.decided...).replay(p, tc.earlier, 2)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("want the replay refused with %q, got %v", tc.refused, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != v1alpha1.PhaseRunning || st.StepCount != 2 || st.CurrentAgent != "reporter" {
				t.Fatalf("want the run past the gate at reporter: %s %s %d", st.Phase, st.CurrentAgent, st.StepCount)
			}
		})
	}
}

func TestAGateWithoutApprovalIsPassedOnlyByARunThatMaySkipIt(t *testing.T) {
	h := gatedHistory()
	skip := mustPlan(t, pipeline()).ForRun("r", "ns", v1alpha1.ApprovalsSkip, "alice")
	if _, err := h.replay(skip, "alice", 2); err != nil {
		t.Fatalf("a run with approvals: Skip passes a gate its creator may pass: %v", err)
	}
	strict := mustPlan(t, pipeline().AllowSelfApproval("plan", false)).ForRun("r", "ns", v1alpha1.ApprovalsSkip, "alice")
	if _, err := h.replay(strict, "alice", 2); err == nil || !strings.Contains(err.Error(), "waited at gate plan") {
		t.Fatalf("Skip does not pass a gate that needs someone other than the creator: %v", err)
	}
}

func TestTheGateAfterTheLastReplayedStepOpensForTheNewRun(t *testing.T) {
	p := createdBy(t, pipeline().AllowSelfApproval("plan", false), "mallory")
	// The earlier run had its plan approved after step 1; a run from step 1 waits again.
	replayed, err := gatedHistory(approved("plan", "bob")).replay(p, "alice", 1)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	d := StartFrom(p, replayed, "", "rev2", "earlier", 1, now)
	s := d.Status
	if s.Phase != v1alpha1.PhaseAwaitingApproval || s.PendingApproval == nil || s.PendingApproval.Gate != "plan" ||
		len(s.PendingApproval.ApprovedBy) != 0 || !s.PendingApproval.Since.Time.Equal(now) {
		t.Fatalf("want the plan gate open afresh: %s %+v", s.Phase, s.PendingApproval)
	}
	if len(d.Events) != 1 || d.Events[0].Reason != EventAwaitingApproval || !strings.Contains(d.Events[0].Message, "from people other than mallory") {
		t.Fatalf("want an AwaitingApproval Event naming who may not approve: %+v", d.Events)
	}
	refused := Decide(p, s, decision(1, "approve", "plan", "mallory"), now).Status
	if refused.Phase != v1alpha1.PhaseAwaitingApproval {
		t.Fatalf("the new run's creator cannot approve: %s", refused.Phase)
	}
	passed := Decide(p, s, decision(1, "approve", "plan", "bob"), now).Status
	if passed.Phase != v1alpha1.PhaseRunning || passed.CurrentAgent != "worker" {
		t.Fatalf("another person approves: %s %s", passed.Phase, passed.CurrentAgent)
	}
}

func TestTheGateBeforeCompleteOpensAgain(t *testing.T) {
	p := gatedPlan(t, pipeline())
	h := gatedHistory(approved("plan", "bob"))
	h.steps = append(h.steps, RecordedStep{Result: StepResult{Agent: "reporter", Input: "the work", Result: turn{Output: "report"}}, Time: t0.Add(2 * time.Minute)})
	replayed, err := h.replay(p, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	s := StartFrom(p, replayed, "", "rev2", "earlier", 3, t0.Add(time.Hour)).Status
	if s.Phase != v1alpha1.PhaseAwaitingApproval || s.PendingApproval.Gate != "final" || s.PendingApproval.Completes == nil {
		t.Fatalf("want the final gate open, completing once passed: %s %+v", s.Phase, s.PendingApproval)
	}
	done := Decide(p, s, decision(1, "approve", "final", "bob"), t0.Add(2*time.Hour)).Status
	if done.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("want the run to complete past the gate: %s", done.Phase)
	}
}

func TestARejectionThatRevisedIsReplayed(t *testing.T) {
	p := gatedPlan(t, pipeline())
	rejected := Decided{ApprovalRecord: v1alpha1.ApprovalRecord{Gate: "plan", Decision: v1alpha1.RecordRejected, Revise: "planner", By: "bob", Feedback: "cheaper", Time: metav1.NewTime(t0)}}
	h := recording{
		steps: []RecordedStep{
			{Result: StepResult{Agent: "planner", Input: "task", Result: say("the plan", "worker")}, Time: t0},
			{Result: StepResult{Agent: "planner", Input: "revised", Result: say("a cheaper plan", "worker")}, Time: t0.Add(time.Minute)},
			{Result: StepResult{Agent: "worker", Input: "a cheaper plan", Result: say("the work", "reporter")}, Time: t0.Add(2 * time.Minute)},
		},
		after: map[int32][]Decided{1: {rejected}, 2: {approved("plan", "carol")}},
	}
	st, err := h.replay(p, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if st.StepCount != 3 || st.CurrentAgent != "reporter" {
		t.Fatalf("want the revision and the approval replayed: %+v", st)
	}
	if !strings.Contains(h.steps[1].Result.Input, "revised") {
		t.Fatal("the test's history is wrong")
	}
}

func TestReplayTakesReplies(t *testing.T) {
	p := mustPlan(t, team().Signal("ASK", v1alpha1.ActionAwaitInput))
	reply := Decided{ApprovalRecord: v1alpha1.ApprovalRecord{Decision: v1alpha1.RecordReplied, By: "alice", Time: metav1.NewTime(t0)}, Reply: "eu-west-1"}
	h := recording{
		steps: []RecordedStep{
			{Result: StepResult{Agent: "lead", Input: "task", Result: turn{Output: "which region?", Signal: "ASK"}}, Time: t0},
			{Result: StepResult{Agent: "lead", Input: "eu-west-1", Result: say("plan for eu-west-1", "worker")}, Time: t0},
		},
		after: map[int32][]Decided{1: {reply}},
	}
	got, err := h.replay(p, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.StepCount != 2 || got.CurrentAgent != "worker" || got.Phase != v1alpha1.PhaseRunning {
		t.Fatalf("replayed past the question: %+v", got)
	}
	if _, err := h.replay(p, "", 1); err != nil {
		t.Fatalf("a replay may end waiting for a reply: %v", err)
	}
	h.after = nil
	if _, err := h.replay(p, "", 2); err == nil || !strings.Contains(err.Error(), "step 1 asked for input and the transcript holds no reply") {
		t.Fatalf("want a missing reply refused, got %v", err)
	}
}

func TestReplayRefusesToolCallsTheCurrentConfigWouldNotMake(t *testing.T) {
	tools := func(allow []string, gated bool) *ConfigWrapper {
		uses := Uses("crm").Allow(allow...)
		if gated {
			uses = uses.Approved(1)
		}
		return MakeConfig("tools", "ns").HTTPTool("crm", "http://crm.example").Agents(
			MakeAgent("lead").HandsOffTo("worker").Tools(uses),
			MakeAgent("worker").HandsOffTo("lead"))
	}
	call := func(approvedBy ...string) recording {
		return recording{steps: []RecordedStep{{
			Result: StepResult{Agent: "lead", Input: "task", Result: say("looked it up", "worker")}, Time: t0,
			Calls: []RecordedCall{{Server: "crm", Tool: "crm", ApprovedBy: approvedBy}},
		}}}
	}
	cases := map[string]struct {
		config  *ConfigWrapper
		h       recording
		refused string
	}{
		"a tool the agent may call":                   {config: tools(nil, false), h: call()},
		"a tool the agent may no longer call":         {config: tools([]string{"other"}, false), h: call(), refused: "step 1's call 1, of crm/crm, was made, and under the current config it is refused (agent lead may not call crm/crm): start from step 0 or earlier"},
		"a call made without the approval now needed": {config: tools(nil, true), h: call(), refused: "step 1 called crm/crm with 0 approval(s), and its gate tool/crm/crm now needs 1"},
		"a call someone approved":                     {config: tools(nil, true), h: call("bob")},
		"a refused call needs nothing": {config: tools([]string{"other"}, true),
			h: recording{steps: []RecordedStep{{Result: StepResult{Agent: "lead", Input: "task", Result: say("no", "worker")}, Time: t0,
				Calls: []RecordedCall{{Server: "crm", Tool: "crm", Refused: true}}}}}},
		"calls past the run's limit now": {config: tools(nil, false).MaxToolCalls(1),
			h: recording{steps: []RecordedStep{{Result: StepResult{Agent: "lead", Input: "task", Result: say("looked twice", "worker")}, Time: t0,
				Calls: []RecordedCall{{Server: "crm", Tool: "crm", Digest: "a"}, {Server: "crm", Tool: "crm", Digest: "b"}}}}},
			refused: "step 1's call 2 would end the run under the current config (limits.maxToolCalls 1 reached"},
		"the same call past the repeated-call detector now": {config: tools(nil, false).MaxRepeatedToolCalls(1),
			h: recording{steps: []RecordedStep{{Result: StepResult{Agent: "lead", Input: "task", Result: say("looked twice", "worker")}, Time: t0,
				Calls: []RecordedCall{{Server: "crm", Tool: "crm", Digest: "a"}, {Server: "crm", Tool: "crm", Digest: "a"}}}}},
			refused: "step 1's call 2 would end the run under the current config (RepeatedToolCall"},
		"a step that took longer than its agent now may": {config: tools(nil, false).AgentTimeout(time.Second),
			h:       recording{steps: []RecordedStep{{Result: StepResult{Agent: "lead", Input: "task", Result: say("slow", "worker")}, Time: t0, Latency: 3 * time.Second}}},
			refused: "step 1 took 3s, and under the current config lead times out after 1s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tc.h.replay(mustPlan(t, tc.config), "", 1)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatal(err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("want %q, got %v", tc.refused, err)
			}
		})
	}
}

func TestReplayRefusesStepsThatDoNotFollow(t *testing.T) {
	p := mustPlan(t, team())
	steps, _ := recorded(t, p, say("plan", "worker"), turn{Output: "done", Signal: "STOP"})
	wrong := []RecordedStep{{Result: StepResult{Agent: "worker", Result: say("x", "lead")}, Time: t0}}
	if _, err := replayAll(p, wrong); err == nil || !strings.Contains(err.Error(), "step 1 was taken by worker, but lead has control") {
		t.Fatalf("want a mismatch refused, got %v", err)
	}
	if _, err := replayAll(p, steps); err != nil {
		t.Fatalf("worker's STOP is ignored, the run goes on: %v", err)
	}
	closer := []RecordedStep{steps[0], {Result: StepResult{Agent: "worker", Result: say("to closer?", "lead")}, Time: t0},
		{Result: StepResult{Agent: "lead", Result: say("close", "closer")}, Time: t0},
		{Result: StepResult{Agent: "closer", Result: turn{Output: "bye", Signal: "STOP"}}, Time: t0}}
	if _, err := replayAll(p, closer); err == nil || !strings.Contains(err.Error(), "the run ended Terminated at step 4") {
		t.Fatalf("want an ended run refused, got %v", err)
	}
	r := NewReplay(p, "earlier", "", "task", "rev", t0)
	if err := r.Step(2, steps[1]); err == nil || !strings.Contains(err.Error(), "does not hold step 1") {
		t.Fatalf("want a missing step refused, got %v", err)
	}
}
