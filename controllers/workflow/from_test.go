package workflow

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/decisions"
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

func TestReplayRebuildsTheStatusAfterAStep(t *testing.T) {
	p := mustPlan(t, team().Allow(5, "lead", "worker"))
	steps, after := recorded(t, p, say("plan A", "worker"), say("did A", "lead"), say("plan B", "worker"), say("did B", "lead"))
	for n := 1; n <= len(steps); n++ {
		got, err := Replay(p, "task", "team-rev", t0, steps[:n])
		if err != nil {
			t.Fatalf("after step %d: %v", n, err)
		}
		want := after[n-1]
		if got.StepCount != want.StepCount || got.HandoffCount != want.HandoffCount || got.CurrentAgent != want.CurrentAgent ||
			got.Input != want.Input || got.TokensUsed != want.TokensUsed || len(got.HandoffSequence) != len(want.HandoffSequence) {
			t.Fatalf("after step %d: got %+v, want %+v", n, got, want)
		}
	}

	d := StartFrom(p, mustReplay(t, p, steps[:2]), "try plan C", "earlier", 2, t0.Add(time.Hour))
	s := d.Status
	if s.Phase != v1alpha1.PhaseRunning || s.StepCount != 2 || s.CurrentAgent != "lead" || s.Input != "try plan C" ||
		!s.StartTime.Time.Equal(t0.Add(time.Hour)) || s.HandoffSequence[1].To != "lead" {
		t.Fatalf("start from step 2: %+v", s)
	}
	if c := s.Conditions[0]; !strings.Contains(c.Message, "continuing run earlier after step 2") {
		t.Fatalf("condition %+v", c)
	}
}

func mustReplay(t *testing.T, p *Plan, steps []RecordedStep) v1alpha1.AgentRunStatus {
	t.Helper()
	st, err := Replay(p, "task", "team-rev", t0, steps)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestReplayPassesGatesAndTakesReplies(t *testing.T) {
	c := team().Gate("review", "worker", 2).Signal("ASK", v1alpha1.ActionAwaitInput)
	p := mustPlan(t, c)
	st := started(p)
	first := StepResult{Agent: "lead", Input: st.Input, Result: say("plan", "worker")}
	st = Apply(p, st, first, t0).Status
	second := StepResult{Agent: "worker", Input: st.Input, Result: say("did it", "lead")}
	st = Apply(p, st, second, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingApproval {
		t.Fatalf("the gate opens: %s", st.Phase)
	}
	third := StepResult{Agent: "lead", Input: "did it", Result: turn{Output: "which region?", Signal: "ASK"}}
	reply := &decisions.Queued{Seq: 1, Action: decisions.Reply, Reply: "eu-west-1", By: "alice"}
	fourth := StepResult{Agent: "lead", Input: "eu-west-1", Result: say("plan for eu-west-1", "worker")}
	steps := []RecordedStep{{Result: first, Time: t0}, {Result: second, Time: t0}, {Result: third, Time: t0, Reply: reply}, {Result: fourth, Time: t0}}
	got, err := Replay(p, "task", "team-rev", t0, steps)
	if err != nil {
		t.Fatal(err)
	}
	if got.StepCount != 4 || got.CurrentAgent != "worker" || got.Phase != v1alpha1.PhaseRunning {
		t.Fatalf("replayed past the gate and the question: %+v", got)
	}
	if _, err := Replay(p, "task", "team-rev", t0, steps[:3]); err != nil {
		t.Fatalf("a replay may end waiting for a reply: %v", err)
	}
	noReply := append([]RecordedStep(nil), steps...)
	noReply[2].Reply = nil
	if _, err := Replay(p, "task", "team-rev", t0, noReply); err == nil || !strings.Contains(err.Error(), "step 3 asked for input and the transcript holds no reply") {
		t.Fatalf("want a missing reply refused, got %v", err)
	}
}

func TestReplayRefusesStepsThatDoNotFollow(t *testing.T) {
	p := mustPlan(t, team())
	steps, _ := recorded(t, p, say("plan", "worker"), turn{Output: "done", Signal: "STOP"})
	wrong := []RecordedStep{{Result: StepResult{Agent: "worker", Result: say("x", "lead")}, Time: t0}}
	if _, err := Replay(p, "task", "rev", t0, wrong); err == nil || !strings.Contains(err.Error(), "step 1 was taken by worker, but lead has control") {
		t.Fatalf("want a mismatch refused, got %v", err)
	}
	if _, err := Replay(p, "task", "rev", t0, steps); err != nil {
		t.Fatalf("worker's STOP is ignored, the run goes on: %v", err)
	}
	closer := []RecordedStep{steps[0], {Result: StepResult{Agent: "worker", Result: say("to closer?", "lead")}, Time: t0},
		{Result: StepResult{Agent: "lead", Result: say("close", "closer")}, Time: t0},
		{Result: StepResult{Agent: "closer", Result: turn{Output: "bye", Signal: "STOP"}}, Time: t0}}
	if _, err := Replay(p, "task", "rev", t0, closer); err == nil || !strings.Contains(err.Error(), "the run ended Terminated at step 4") {
		t.Fatalf("want an ended run refused, got %v", err)
	}
}
