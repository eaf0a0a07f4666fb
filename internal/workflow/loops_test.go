package workflow

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// turn is one scripted step for drive: who acts is decided by the run, this says what it answers.
type turn = Result

// drive applies answers to a started run, one per step, while it runs, and returns the status.
func drive(t *testing.T, p *Plan, answers ...turn) v1alpha1.AgentRunStatus {
	t.Helper()
	st := started(p)
	for _, a := range answers {
		if st.Phase.Terminal() {
			break
		}
		st = Apply(p, st, StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: a}, t0).Status
	}
	return st
}

func say(output, handoff string) turn { return turn{Output: output, Handoff: handoff} }

func TestLoopDetectors(t *testing.T) {
	trio := func() *ConfigWrapper {
		return MakeConfig("trio", "ns").Agents(
			MakeAgent("a").HandsOffTo("a", "b", "c"),
			MakeAgent("b").HandsOffTo("a", "b", "c"),
			MakeAgent("c").HandsOffTo("a", "b", "c"),
		).MaxSteps(100).MaxHandoffs(100)
	}
	cases := map[string]struct {
		config   *ConfigWrapper
		answers  []turn
		detector v1alpha1.LoopDetector
		pattern  []string
		steps    []int32
		message  string
	}{
		"Window: an agent handing off to itself": {
			config:   trio(),
			answers:  []turn{say("1", "a"), say("2", "a"), say("3", "a")},
			detector: v1alpha1.DetectorWindow,
			pattern:  []string{"a", "a", "a"},
			steps:    []int32{1, 2, 3},
			message:  "loop detected (Window): the last 3 steps, a (1), a (2), a (next, 3), have 1 distinct agent(s), fewer than minUniqueAgents 2",
		},
		"Cycle: A->B->A three times": {
			config:   trio(),
			answers:  []turn{say("1", "b"), say("2", "a"), say("3", "b"), say("4", "a"), say("5", "b"), say("6", "a")},
			detector: v1alpha1.DetectorCycle,
			pattern:  []string{"a", "b"},
			steps:    []int32{1, 2, 3, 4, 5, 6},
			message:  "loop detected (Cycle): a -> b -> a repeated 3 times in a row at steps 1-6 (maxCycleRepeats 3)",
		},
		"Cycle: a three-agent cycle": {
			config: trio(),
			answers: []turn{say("1", "b"), say("2", "c"), say("3", "a"), say("4", "b"), say("5", "c"),
				say("6", "a"), say("7", "b"), say("8", "c"), say("9", "a")},
			detector: v1alpha1.DetectorCycle,
			pattern:  []string{"a", "b", "c"},
			steps:    []int32{1, 2, 3, 4, 5, 6, 7, 8, 9},
			message:  "loop detected (Cycle): a -> b -> c -> a repeated 3 times in a row at steps 1-9 (maxCycleRepeats 3)",
		},
		"RepeatedInput: the same agent handed the same input again": {
			config:   trio(),
			answers:  []turn{say("same", "b"), say("x", "a"), say("same", "b")},
			detector: v1alpha1.DetectorRepeatedInput,
			pattern:  []string{"b"},
			steps:    []int32{2, 4},
			message:  "loop detected (RepeatedInput): b would be given the same input (digest " + digest("same") + ") for the 2nd time, at steps 2, 4 (maxRepeatedInputs 2)",
		},
		"RepeatedOutput: the same agent saying the same thing again and again": {
			config: trio().LoopDetection(nil, nil, nil, ptr.To[int32](10), nil),
			answers: []turn{say("stuck", "b"), say("b1", "c"), say("c1", "a"), say("stuck", "c"), say("c2", "b"),
				say("b2", "a"), say("stuck", "b")},
			detector: v1alpha1.DetectorRepeatedOutput,
			pattern:  []string{"a"},
			steps:    []int32{1, 4, 7},
			message:  "loop detected (RepeatedOutput): a returned the same output (digest " + digest("stuck") + ") 3 times, at steps 1, 4, 7 (maxRepeatedOutputs 3)",
		},
		"an allowed cycle past its own bound": {
			config: trio().Allow(2, "b", "a"),
			answers: []turn{say("1", "b"), say("2", "a"), say("3", "b"), say("4", "a"), say("5", "b"),
				say("6", "a")},
			detector: v1alpha1.DetectorCycle,
			pattern:  []string{"a", "b"},
			steps:    []int32{1, 2, 3, 4, 5, 6},
			message:  "loop detected (Cycle): a -> b -> a repeated 3 times in a row at steps 1-6, past its allowed 2 repeats",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := drive(t, mustPlan(t, tc.config), tc.answers...)
			if st.TerminationReason != v1alpha1.ReasonLoopDetected {
				t.Fatalf("want LoopDetected, got %q after %d steps (%s)", st.TerminationReason, st.StepCount, st.TerminationMessage)
			}
			want := &v1alpha1.LoopStatus{Detector: tc.detector, Pattern: tc.pattern, Steps: tc.steps}
			if diff := cmp.Diff(want, st.Loop); diff != "" {
				t.Errorf("status.loop (-want +got):\n%s", diff)
			}
			if st.TerminationMessage != tc.message {
				t.Errorf("message:\n got %q\nwant %q", st.TerminationMessage, tc.message)
			}
			// The step that would close a loop never runs; a repeated output is seen once it happened.
			last, next := tc.steps[len(tc.steps)-1], st.StepCount+1
			if tc.detector == v1alpha1.DetectorRepeatedOutput {
				next = st.StepCount
			}
			if last != next {
				t.Errorf("the loop's last step is %d, want %d (steps taken: %d)", last, next, st.StepCount)
			}
		})
	}
}

// A coder and a reviewer go round six times, the coder's drafts improving each round, and
// the reviewer approves: an allowed, progressing loop is never flagged.
func TestCoderReviewerLoopThatConvergesCompletes(t *testing.T) {
	p := mustPlan(t, MakeConfig("review", "ns").Agents(
		MakeAgent("coder").HandsOffTo("reviewer"),
		MakeAgent("reviewer").HandsOffTo("coder").Terminator(),
	).Allow(10, "coder", "reviewer").MaxSteps(50).MaxHandoffs(50))
	var answers []turn
	for round := 1; round <= 6; round++ {
		answers = append(answers, say(fmt.Sprintf("draft v%d", round), "reviewer"))
		if round < 6 {
			answers = append(answers, say(fmt.Sprintf("round %d: fix the edge case %d", round, round), "coder"))
		}
	}
	answers = append(answers, say("approved", ""))
	st := drive(t, p, answers...)
	if st.TerminationReason != v1alpha1.ReasonCompleted || st.Output != "approved" || st.StepCount != 12 {
		t.Fatalf("want Completed with the approval after 12 steps, got %s after %d: %s", st.TerminationReason, st.StepCount, st.TerminationMessage)
	}
}

// A truncated answer followed by its full retry is neither a repeated input nor a loop, even
// with the strictest settings.
func TestTruncatedAnswerAndItsRetryAreNotARepeat(t *testing.T) {
	p := mustPlan(t, MakeConfig("cut", "ns").Agents(
		MakeAgent("writer").HandsOffTo("editor"),
		MakeAgent("editor").HandsOffTo("writer").Terminator(),
	).LoopDetection(ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2)))
	st := drive(t, p,
		turn{Output: "The report, part one...", FinishReason: v1alpha1.FinishLength},
		turn{Output: "The report, part one...", FinishReason: v1alpha1.FinishLength},
		say("The whole report.", "editor"),
		say("Published.", ""),
	)
	if st.TerminationReason != v1alpha1.ReasonCompleted || st.ErrorCount != 0 {
		t.Fatalf("want Completed without errors, got %s: %s", st.TerminationReason, st.TerminationMessage)
	}
	var outcomes []v1alpha1.StepOutcome
	for _, r := range st.HandoffSequence {
		outcomes = append(outcomes, r.Outcome)
	}
	want := []v1alpha1.StepOutcome{v1alpha1.OutcomeTruncated, v1alpha1.OutcomeTruncated, v1alpha1.OutcomeHandoff, v1alpha1.OutcomeFinal}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
}

func TestTokenWarningOnce(t *testing.T) {
	p := mustPlan(t, team().MaxTokens(1000))
	st := drive(t, p, turn{Output: "a", Handoff: "worker", Tokens: 500})
	if len(st.Conditions) == 0 || conditionStatus(st, v1alpha1.ConditionTokenBudgetWarning) != "" {
		t.Fatalf("warned at 50%%")
	}
	d := Apply(p, st, StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: turn{Output: "b", Handoff: "lead", Tokens: 420}}, t0)
	if got := eventReasons(d); !cmp.Equal(got, []string{EventTokenBudgetWarning}) {
		t.Fatalf("events at 92%%: %v", got)
	}
	if d.Events[0].Message != "token budget: tokens 920 of 1000 used (92%), past the warning at 90%" {
		t.Fatalf("message: %q", d.Events[0].Message)
	}
	st = d.Status
	d = Apply(p, st, StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: turn{Output: "c", Handoff: "worker", Tokens: 10}}, t0)
	if len(d.Events) != 0 || conditionStatus(d.Status, v1alpha1.ConditionTokenBudgetWarning) != "True" {
		t.Fatalf("warned twice or lost the condition: %v", d.Events)
	}
}

func conditionStatus(st v1alpha1.AgentRunStatus, typ string) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return string(c.Status)
		}
	}
	return ""
}

func TestSignalsFromMarkerLines(t *testing.T) {
	p := mustPlan(t, team())
	cases := map[string]struct {
		res  StepResult
		want string
	}{
		"structured and declared":             {StepResult{Result: turn{Signal: "DONE", Output: "STOP"}}, "DONE"},
		"structured but undeclared, no lines": {StepResult{Result: turn{Signal: "NOPE"}}, ""},
		"a marker line alone":                 {StepResult{Result: turn{Output: "Ticket closed.\n\nSTOP"}}, "STOP"},
		"a marker line with a colon":          {StepResult{Result: turn{Output: "NOTE: cached fix found"}}, "NOTE"},
		"the last marker line wins":           {StepResult{Result: turn{Output: "NOTE: first\nDONE"}}, "DONE"},
		"a name inside a sentence is no mark": {StepResult{Result: turn{Output: "do not STOP yet"}}, ""},
		"markdown around the marker":          {StepResult{Result: turn{Output: "**STOP**"}}, "STOP"},
		"an undeclared marker":                {StepResult{Result: turn{Output: "HALT"}}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := detectSignal(p, tc.res); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A turn of a session sees the steps of its earlier turns given the same history: a repeated
// output trips on what they said, naming how many were theirs; Window and Cycle start fresh.
func TestEarlierTurnsCountForRepeatedOutputsNotForCycles(t *testing.T) {
	cfg := MakeConfig("duo", "ns").Agents(MakeAgent("a").HandsOffTo("b"), MakeAgent("b").HandsOffTo("a")).MaxSteps(100).MaxHandoffs(100)
	plan := mustPlan(t, cfg)
	earlier := []v1alpha1.HandoffRecord{
		{Step: 1, From: "a", To: "b", Outcome: v1alpha1.OutcomeHandoff, InputDigest: digest("x"), OutputDigest: digest("stuck")},
		{Step: 2, From: "b", To: "a", Outcome: v1alpha1.OutcomeHandoff, InputDigest: digest("y"), OutputDigest: digest("b says")},
		{Step: 1, From: "a", To: "b", Outcome: v1alpha1.OutcomeHandoff, InputDigest: digest("x"), OutputDigest: digest("stuck")},
		{Step: 2, From: "b", To: "a", Outcome: v1alpha1.OutcomeHandoff, InputDigest: digest("z"), OutputDigest: digest("b again")},
	}
	st := drive(t, plan.WithEarlierTurns(earlier, []string{"uid-1", "uid-2"}), say("stuck", "b"))
	if st.TerminationReason != v1alpha1.ReasonLoopDetected || st.Loop == nil || st.Loop.Detector != v1alpha1.DetectorRepeatedOutput {
		t.Fatalf("ended %q (%s); want RepeatedOutput across turns", st.TerminationReason, st.TerminationMessage)
	}
	want := "loop detected (RepeatedOutput): a returned the same output (digest " + digest("stuck") +
		") 3 times, at steps 1, 1, 1 (2 of them in earlier turns of the session given the same history) (maxRepeatedOutputs 3)"
	if st.TerminationMessage != want {
		t.Errorf("message:\n got %q\nwant %q", st.TerminationMessage, want)
	}
	// Without them, the same step is no loop: a -> b -> a -> b across turns is no cycle either.
	if st := drive(t, plan, say("stuck", "b"), say("fine", "a")); st.Phase.Terminal() {
		t.Errorf("a turn without earlier turns ended %s: %s", st.TerminationReason, st.TerminationMessage)
	}
	if got := plan.WithEarlierTurns(earlier, []string{"uid-1"}).EarlierTurns(); len(got) != 1 || got[0] != "uid-1" {
		t.Errorf("earlier turns %v", got)
	}
}
