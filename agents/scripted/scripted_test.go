package scripted

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

func turn(output, when string) v1alpha1.ScriptTurn {
	return v1alpha1.ScriptTurn{Output: output, When: when}
}

func TestScriptTurnsAreConsumedInOrderAndTheLastRepeats(t *testing.T) {
	script := []v1alpha1.ScriptTurn{turn("one", ""), turn("two", ""), turn("three", "")}
	var got []string
	for i := int32(0); i < 5; i++ {
		tr, err := pickTurn(script, i, "anything")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tr.Output)
	}
	if diff := cmp.Diff([]string{"one", "two", "three", "three", "three"}, got); diff != "" {
		t.Fatalf("turns (-want +got):\n%s", diff)
	}
}

func TestScriptWhenPicksTheFirstMatchingTurnFromTheAgentsPosition(t *testing.T) {
	script := []v1alpha1.ScriptTurn{turn("start", "Ticket"), turn("analyse", "NO_MEMORY"), turn("close", "summary")}
	cases := map[string]struct {
		turn  int32
		input string
		want  string
	}{
		"matches at its position":                 {0, "Ticket 1", "start"},
		"skips forward to the first match":        {0, "the summary", "close"},
		"wraps around to an earlier match":        {2, "Ticket 2", "start"},
		"the last turn repeats when it matches":   {7, "summary again", "close"},
		"an empty when matches any input":         {1, "NO_MEMORY_FOUND", "analyse"},
		"position past the end starts at the end": {9, "NO_MEMORY", "analyse"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, err := pickTurn(script, tc.turn, tc.input)
			if err != nil || tr.Output != tc.want {
				t.Fatalf("got %q, %v; want %q", tr.Output, err, tc.want)
			}
		})
	}
	if _, err := pickTurn(script, 0, "unrelated"); !errors.Is(err, ErrNoTurn) {
		t.Fatalf("no matching turn: got %v, want ErrNoTurn", err)
	}
}

func TestScriptedStepReportsEverythingTheTurnSays(t *testing.T) {
	agent := v1alpha1.Agent{Name: "a", Script: []v1alpha1.ScriptTurn{{
		Output: "hi", Handoff: "b", Reason: "why", Signal: "S", Tokens: 42,
		Routing:  &v1alpha1.RoutingDecision{Target: "b", Reason: "best"},
		Parallel: []v1alpha1.BranchRequest{{Agent: "b", Input: "one"}, {Agent: "c"}},
	}, {Output: "cut", FinishReason: v1alpha1.FinishLength}, {Error: "backend down"}}}
	s := New(agents.Dependencies{Clock: clocktesting.NewFakeClock(time.Now())})
	ctx := context.Background()

	got, err := s.Step(ctx, &agents.Request{Agent: agent, Turn: 0})
	want := workflow.Result{Output: "hi", Handoff: "b", Reason: "why", Signal: "S", Tokens: 42, FinishReason: v1alpha1.FinishStop,
		Routing: &v1alpha1.RoutingDecision{Target: "b", Reason: "best"}, Parallel: []workflow.Branch{{Agent: "b", Input: "one"}, {Agent: "c"}}}
	if err != nil || !cmp.Equal(&want, got) {
		t.Fatalf("turn 0: %v, %s", err, cmp.Diff(&want, got))
	}
	if got, _ := s.Step(ctx, &agents.Request{Agent: agent, Turn: 1}); got.FinishReason != v1alpha1.FinishLength {
		t.Fatalf("turn 1: finish reason %q", got.FinishReason)
	}
	if _, err := s.Step(ctx, &agents.Request{Agent: agent, Turn: 2}); err == nil || err.Error() != "backend down" {
		t.Fatalf("turn 2: want the scripted error, got %v", err)
	}
}

func TestScriptedDelayHonoursTheStepDeadline(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := New(agents.Dependencies{Clock: clk})
	agent := v1alpha1.Agent{Name: "slow", Script: []v1alpha1.ScriptTurn{{Output: "late", Delay: v1alpha1.NewDuration(time.Minute)}}}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Step(ctx, &agents.Request{Agent: agent}); done <- err }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled during the delay: got %v", err)
	}

	go func() {
		r, err := s.Step(context.Background(), &agents.Request{Agent: agent})
		done <- errors.Join(err, check(r != nil && r.Output == "late"))
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("after the delay: %v", err)
	}
}

func check(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("unexpected output")
}
