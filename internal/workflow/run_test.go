package workflow

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

var t0 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// team is a small Swarm: lead routes, worker works, closer is the only terminator.
func team() *ConfigWrapper {
	return MakeConfig("team", "ns").Agents(
		MakeAgent("lead").HandsOffTo("worker", "closer"),
		MakeAgent("worker").HandsOffTo("lead"),
		MakeAgent("closer").HandsOffTo("lead").Terminator(),
	).Signal("STOP", v1alpha1.ActionTerminate).
		Signal("DONE", v1alpha1.ActionComplete).
		Signal("NOTE", v1alpha1.ActionNone)
}

func mustPlan(t *testing.T, c *ConfigWrapper) *Plan {
	t.Helper()
	p, errs := NewPlan(c.Obj().Spec, nil)
	if len(errs) > 0 {
		t.Fatalf("NewPlan: %v", errs)
	}
	return p
}

// started is a run just started on the plan.
func started(p *Plan) v1alpha1.AgentRunStatus {
	return Start(p, v1alpha1.AgentRunStatus{}, "task", "team-rev", t0).Status
}

// at moves a started run so that agent has control, as if it got there by a handoff.
func at(p *Plan, agent string) v1alpha1.AgentRunStatus {
	st := started(p)
	if agent != st.CurrentAgent {
		st = Apply(p, st, StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: Result{Output: "go", Handoff: agent}}, t0).Status
	}
	return st
}

func eventReasons(d Update) []string {
	var out []string
	for _, e := range d.Events {
		out = append(out, e.Reason)
	}
	return out
}

func TestApplySwarm(t *testing.T) {
	type want struct {
		phase    v1alpha1.RunPhase
		reason   v1alpha1.TerminationReason
		agent    string
		handoffs int32
		errors   int32
		outcome  v1alpha1.StepOutcome
		events   []string
		message  string
		output   string
	}
	cases := map[string]struct {
		config *ConfigWrapper
		from   string
		result StepResult
		want   want
	}{
		"an allowed handoff moves control and counts": {
			from:   "lead",
			result: StepResult{Result: Result{Output: "on it", Handoff: "worker", Reason: "needs work"}},
			want:   want{phase: v1alpha1.PhaseRunning, agent: "worker", handoffs: 1, outcome: v1alpha1.OutcomeHandoff},
		},
		"a handoff outside the agent's handoffs is refused, counted as a failure (not a handoff) and recovered by the entrypoint": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "skip ahead", Handoff: "closer"}},
			want: want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 1, errors: 1, outcome: v1alpha1.OutcomeFailed,
				events: []string{EventHandoffRefused}},
		},
		"a refused handoff from the entrypoint leaves no one to recover": {
			from:   "lead",
			result: StepResult{Result: Result{Output: "x", Handoff: "nobody"}},
			want: want{phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonTooManyErrors, agent: "lead", errors: 1,
				outcome: v1alpha1.OutcomeFailed, events: []string{EventHandoffRefused, string(v1alpha1.ReasonTooManyErrors)},
				message: `handoff to nobody refused`},
		},
		"a handoff target that is free text is quoted, never echoed raw": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "x", Handoff: "The Closer, please"}},
			want: want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 1, errors: 1, outcome: v1alpha1.OutcomeFailed,
				events: []string{EventHandoffRefused}, message: `handoff to "The Closer, please" refused`},
		},
		"Terminate from a terminator ends the run Terminated with its answer": {
			from:   "closer",
			result: StepResult{Result: Result{Output: "closed", Signal: "STOP"}},
			want: want{phase: v1alpha1.PhaseSucceeded, reason: v1alpha1.ReasonTerminated, agent: "closer", handoffs: 1,
				outcome: v1alpha1.OutcomeSignal, events: nil,
				message: "terminator closer emitted STOP at step 2", output: "closed"},
		},
		"Terminate from a non-terminator is ignored with an Event and the step routes as usual": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "I think we are done", Signal: "STOP", Handoff: "lead"}},
			want: want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 2, outcome: v1alpha1.OutcomeHandoff,
				events: []string{EventTerminateIgnored}},
		},
		"Complete ends the run Completed from any agent": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "all done", Signal: "DONE"}},
			want: want{phase: v1alpha1.PhaseSucceeded, reason: v1alpha1.ReasonCompleted, agent: "worker", handoffs: 1,
				outcome: v1alpha1.OutcomeSignal, output: "all done"},
		},
		"a signal with action None is recorded and routing goes on": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "noted", Signal: "NOTE", Handoff: "lead"}},
			want:   want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 2, outcome: v1alpha1.OutcomeHandoff},
		},
		"an undeclared signal does not count": {
			from:   "closer",
			result: StepResult{Result: Result{Output: "TERMINATE", Signal: "TERMINATE", Handoff: "lead"}},
			want:   want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 2, outcome: v1alpha1.OutcomeHandoff},
		},
		"a terminator's plain answer is final": {
			from:   "closer",
			result: StepResult{Result: Result{Output: "the answer"}},
			want: want{phase: v1alpha1.PhaseSucceeded, reason: v1alpha1.ReasonCompleted, agent: "closer", handoffs: 1,
				outcome: v1alpha1.OutcomeFinal, output: "the answer"},
		},
		"a plain answer is final when the config has no terminator": {
			config: MakeConfig("solo", "ns").Agents(MakeAgent("a").HandsOffTo("b"), MakeAgent("b").HandsOffTo("a")),
			from:   "b",
			result: StepResult{Result: Result{Output: "42"}},
			want: want{phase: v1alpha1.PhaseSucceeded, reason: v1alpha1.ReasonCompleted, agent: "b", handoffs: 1,
				outcome: v1alpha1.OutcomeFinal, output: "42",
				message: "config has no terminator"},
		},
		"a plain answer from a non-terminator returns control to the entrypoint, counted as a handoff": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "result"}},
			want:   want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 2, outcome: v1alpha1.OutcomeReturned},
		},
		"a failed step goes to the entrypoint": {
			from:   "worker",
			result: StepResult{Error: "tool crashed"},
			want: want{phase: v1alpha1.PhaseRunning, agent: "lead", handoffs: 1, errors: 1, outcome: v1alpha1.OutcomeFailed,
				events: []string{EventStepFailed}},
		},
		"the entrypoint timing out ends the run AgentTimeout": {
			from:   "lead",
			result: StepResult{Error: "timed out after 2m0s", TimedOut: true},
			want: want{phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonAgentTimeout, agent: "lead", errors: 1,
				outcome: v1alpha1.OutcomeFailed, events: []string{string(v1alpha1.ReasonAgentTimeout)},
				message: "lead failed with no agent to recover (timed out after 2m0s)"},
		},
		"the entrypoint failing ends the run TooManyErrors": {
			from:   "lead",
			result: StepResult{Error: "boom"},
			want: want{phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonTooManyErrors, agent: "lead", errors: 1,
				outcome: v1alpha1.OutcomeFailed, events: []string{string(v1alpha1.ReasonTooManyErrors)}},
		},
		"a truncated answer asks the same agent again without a handoff": {
			from:   "worker",
			result: StepResult{Result: Result{Output: "partial", FinishReason: v1alpha1.FinishLength, Handoff: "lead"}},
			want:   want{phase: v1alpha1.PhaseRunning, agent: "worker", handoffs: 1, outcome: v1alpha1.OutcomeTruncated},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := tc.config
			if cfg == nil {
				cfg = team()
			}
			p := mustPlan(t, cfg)
			st := at(p, tc.from)
			res := tc.result
			res.Agent, res.Input = tc.from, st.Input
			d := Apply(p, st, res, t0.Add(time.Second))
			s := d.Status
			last := s.HandoffSequence[len(s.HandoffSequence)-1]
			got := want{phase: s.Phase, reason: s.TerminationReason, agent: s.CurrentAgent, handoffs: s.HandoffCount,
				errors: s.ErrorCount, outcome: last.Outcome, events: eventReasons(d), message: tc.want.message, output: s.Output}
			if tc.want.message != "" && !strings.Contains(s.TerminationMessage+" "+last.Reason, tc.want.message) {
				t.Errorf("message %q / reason %q does not contain %q", s.TerminationMessage, last.Reason, tc.want.message)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Apply (-want +got):\n%s", diff)
			}
			if s.StepCount != st.StepCount+1 || last.Step != s.StepCount || last.From != tc.from {
				t.Errorf("step not recorded: stepCount %d, last record %+v", s.StepCount, last)
			}
		})
	}
}

func TestTruncationRetriesTwiceThenFails(t *testing.T) {
	p := mustPlan(t, team())
	st := at(p, "worker")
	cut := StepResult{Agent: "worker", Result: Result{Output: "partial", FinishReason: v1alpha1.FinishLength}}
	for i := 1; i <= 2; i++ {
		cut.Input = st.Input
		st = Apply(p, st, cut, t0).Status
		if st.CurrentAgent != "worker" || st.ErrorCount != 0 {
			t.Fatalf("attempt %d: want worker asked again without an error, got agent %s errors %d", i, st.CurrentAgent, st.ErrorCount)
		}
	}
	cut.Input = st.Input
	st = Apply(p, st, cut, t0).Status
	last := st.HandoffSequence[len(st.HandoffSequence)-1]
	if last.Outcome != v1alpha1.OutcomeFailed || st.ErrorCount != 1 || st.CurrentAgent != "lead" {
		t.Fatalf("third truncation: want a failed step recovered by lead, got %+v errors %d agent %s", last, st.ErrorCount, st.CurrentAgent)
	}
	// The retry continues the cut answer, which goes to later agents' context as cut; the caller
	// joins the pieces, and the whole answer is routed normally.
	st = at(p, "worker")
	d := Apply(p, st, cut, t0)
	st = d.Status
	if len(d.Context) != 1 || d.Context[0].Kind != ContextTruncated || d.Context[0].Text != "partial" {
		t.Fatalf("the cut answer goes to the context as cut: %+v", d.Context)
	}
	if next := Next(p, &st); !next.Continues || next.Attempt != 1 {
		t.Fatalf("the retry continues from the cut answer: %+v", next)
	}
	st = Apply(p, st, StepResult{Agent: "worker", Input: st.Input, Result: Result{Output: "partial and the rest", Handoff: "lead"}}, t0).Status
	if st.CurrentAgent != "lead" || st.ErrorCount != 0 || st.Input != "partial and the rest" {
		t.Fatalf("full retry: want the joined answer handed to lead, got agent %s errors %d input %q", st.CurrentAgent, st.ErrorCount, st.Input)
	}
}

func TestGuardsEndTheRunBeforeTheNextStep(t *testing.T) {
	cases := map[string]struct {
		config  *ConfigWrapper
		steps   []StepResult
		after   time.Duration
		reason  v1alpha1.TerminationReason
		message string
	}{
		"maxHandoffs": {
			config:  team().MaxHandoffs(2),
			steps:   []StepResult{{Agent: "lead", Result: Result{Handoff: "worker"}}, {Agent: "worker", Result: Result{Handoff: "lead"}}},
			reason:  v1alpha1.ReasonMaxHandoffsExceeded,
			message: "handoff limit: handoff 2 of 2 reached; lead was not started; last handoffs: lead -> worker -> lead",
		},
		"maxSteps": {
			config:  team().MaxSteps(2),
			steps:   []StepResult{{Agent: "lead", Result: Result{Handoff: "worker"}}, {Agent: "worker", Result: Result{Handoff: "lead"}}},
			reason:  v1alpha1.ReasonMaxStepsExceeded,
			message: "step limit: 2 of 2 steps taken; lead was not started",
		},
		"maxTokens": {
			config:  team().MaxTokens(100),
			steps:   []StepResult{{Agent: "lead", Result: Result{Handoff: "worker", Tokens: 60}}, {Agent: "worker", Result: Result{Handoff: "lead", Tokens: 50}}},
			reason:  v1alpha1.ReasonTokenBudgetExceeded,
			message: "token budget: tokens 110 of 100 used; lead was not started",
		},
		"maxErrors": {
			config:  team().MaxErrors(2),
			steps:   []StepResult{{Agent: "lead", Result: Result{Handoff: "worker"}}, {Agent: "worker", Error: "e1"}, {Agent: "lead", Result: Result{Handoff: "worker"}}, {Agent: "worker", Error: "e2"}},
			reason:  v1alpha1.ReasonTooManyErrors,
			message: "error limit: 2 of 2 steps failed; last failure at step 4, agent worker: e2",
		},
		"per-agent maxSteps": {
			config: MakeConfig("team", "ns").Agents(
				MakeAgent("lead").HandsOffTo("worker"),
				MakeAgent("worker").HandsOffTo("lead").MaxSteps(1)),
			steps:   []StepResult{{Agent: "lead", Result: Result{Handoff: "worker"}}, {Agent: "worker", Result: Result{Handoff: "lead"}}, {Agent: "lead", Result: Result{Handoff: "worker"}}},
			reason:  v1alpha1.ReasonAgentStepLimitExceeded,
			message: "agent step limit: worker took 1 of its 1 steps and was not started again",
		},
		"timeout": {
			config:  team().Timeout(time.Minute),
			steps:   []StepResult{{Agent: "lead", Result: Result{Handoff: "worker"}}},
			after:   time.Minute,
			reason:  v1alpha1.ReasonTimeout,
			message: "run timeout: 1m0s elapsed of 1m0s; worker had control after step 1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustPlan(t, tc.config)
			st := started(p)
			for i, r := range tc.steps {
				if st.Phase.Terminal() {
					t.Fatalf("ended early before step %d: %s", i+1, st.TerminationMessage)
				}
				r.Input = st.Input
				if r.Output == "" {
					r.Output = fmt.Sprintf("progress %d", i) // every step says something new
				}
				st = Apply(p, st, r, t0).Status
			}
			if tc.after > 0 {
				if _, tripped := Check(p, st, t0.Add(tc.after-time.Millisecond)); tripped {
					t.Fatalf("tripped before the deadline")
				}
				d, tripped := Check(p, st, t0.Add(tc.after))
				if !tripped {
					t.Fatalf("did not trip at the deadline")
				}
				st = d.Status
			}
			if st.Phase != v1alpha1.PhaseFailed || st.TerminationReason != tc.reason {
				t.Fatalf("want Failed/%s, got %s/%s (%s)", tc.reason, st.Phase, st.TerminationReason, st.TerminationMessage)
			}
			if st.TerminationMessage != tc.message {
				t.Errorf("message:\n got %q\nwant %q", st.TerminationMessage, tc.message)
			}
		})
	}
}

func TestTerminationIsSetOnce(t *testing.T) {
	p := mustPlan(t, team())
	done := Cancel(started(p), "user asked", t0).Status
	if done.Phase != v1alpha1.PhaseCancelled || done.TerminationReason != v1alpha1.ReasonCancelled {
		t.Fatalf("cancel: got %s/%s", done.Phase, done.TerminationReason)
	}
	again := Fail(done, v1alpha1.ReasonTimeout, "late", t0.Add(time.Hour))
	if diff := cmp.Diff(done, again.Status); diff != "" || len(again.Events) != 0 {
		t.Fatalf("a terminal status changed (-was +now):\n%s events %v", diff, again.Events)
	}
}

func TestStartPinsAndHandsControlToTheEntrypoint(t *testing.T) {
	p := mustPlan(t, team())
	d := Start(p, v1alpha1.AgentRunStatus{}, "the task", "team-abc", t0)
	s := d.Status
	if s.Phase != v1alpha1.PhaseRunning || s.CurrentAgent != "lead" || s.State != "lead" || s.Input != "the task" ||
		s.ConfigRevision != "team-abc" || !s.StartTime.Time.Equal(t0) {
		t.Fatalf("unexpected start status: %+v", s)
	}
	if got := eventReasons(d); len(got) != 0 {
		t.Fatalf("events: %v", got)
	}
	step := Next(p, &s)
	if step.Number != 1 || step.Agent != "lead" || step.Turn != 0 || step.Timeout != DefaultAgentTimeout {
		t.Fatalf("next step: %+v", step)
	}
}

func TestStatusStaysBounded(t *testing.T) {
	p := mustPlan(t, MakeConfig("ping", "ns").Agents(
		MakeAgent("a").HandsOffTo("b"), MakeAgent("b").HandsOffTo("a")).
		MaxSteps(1000).MaxHandoffs(1000).MaxTokens(1<<40).Allow(1000, "a", "b"))
	st := started(p)
	long := strings.Repeat("x", 100_000)
	for i := 0; i < 500; i++ {
		r := StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: Result{
			Output: fmt.Sprint(i, long), Handoff: map[string]string{"a": "b", "b": "a"}[st.CurrentAgent]}}
		st = Apply(p, st, r, t0).Status
		if st.Phase.Terminal() {
			t.Fatalf("ended at step %d: %s", st.StepCount, st.TerminationMessage)
		}
	}
	if st.StepCount != 500 || len(st.HandoffSequence) != maxSequence {
		t.Fatalf("want 500 steps and %d records, got %d and %d", maxSequence, st.StepCount, len(st.HandoffSequence))
	}
	if st.HandoffSequence[0].Step != 500-maxSequence+1 {
		t.Fatalf("oldest kept record is step %d", st.HandoffSequence[0].Step)
	}
	if n := len([]rune(st.Input)); n > maxInput {
		t.Fatalf("input holds %d characters", n)
	}
}

func TestNewPlanRefusesBrokenConfigs(t *testing.T) {
	cases := map[string]struct {
		config *ConfigWrapper
		field  string
	}{
		"unknown entrypoint": {team().Entrypoint("ghost"), "spec.entrypoint"},
		"unknown handoff":    {MakeConfig("c", "ns").Agents(MakeAgent("a").HandsOffTo("ghost")), "spec.agents[0].handoffs[0]"},
		"duplicate agent":    {MakeConfig("c", "ns").Agents(MakeAgent("a"), MakeAgent("a")), "spec.agents[1].name"},
		"no agents":          {MakeConfig("c", "ns").Entrypoint("a"), "spec.agents"},
		"unsupported mode":   {team().Mode("Chaos"), "spec.mode"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := NewPlan(tc.config.Obj().Spec, nil)
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			found := false
			for _, e := range errs {
				found = found || e.Field == tc.field
			}
			if !found {
				t.Fatalf("no error names %s: %v", tc.field, errs)
			}
		})
	}
}

func TestRunOverridesWinOverTheConfig(t *testing.T) {
	c := team().MaxTokens(1000).MaxHandoffs(9).Obj()
	p, _ := NewPlan(c.Spec, MakeRun("r", "ns").MaxTokens(10).Timeout(time.Second).Obj().Spec.Limits)
	want := EffectiveLimits{MaxHandoffs: 9, MaxSteps: DefaultMaxSteps, MaxTokens: 10, TokenWarningPercent: DefaultTokenWarningPercent,
		Timeout: time.Second, AgentTimeout: DefaultAgentTimeout, MaxErrors: DefaultMaxErrors, MaxHandoffDepth: DefaultMaxHandoffDepth, MaxToolCalls: DefaultMaxToolCalls,
		MaxTranscriptBytes: DefaultMaxTranscriptBytes, MaxBranches: DefaultMaxBranches, MaxDepth: DefaultMaxDepth}
	if diff := cmp.Diff(want, p.Limits); diff != "" {
		t.Fatalf("limits (-want +got):\n%s", diff)
	}
}

func TestARunWhoseTranscriptHoldsItsBudgetTakesNoMoreSteps(t *testing.T) {
	c := team().Obj()
	budget := int64(2 << 20)
	c.Spec.Limits.MaxTranscriptBytes = &budget
	p, errs := NewPlan(c.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	st := started(p)
	st = Apply(p, st, StepResult{Agent: "lead", Input: "task", Result: say("big", "worker"), RecordBytes: budget - 1}, t0).Status
	if st.Phase != v1alpha1.PhaseRunning || st.TranscriptBytes != budget-1 {
		t.Fatalf("one byte under the budget, the run goes on: %s %d", st.Phase, st.TranscriptBytes)
	}
	d := Apply(p, st, StepResult{Agent: "worker", Input: "big", Result: say("bigger", "lead"), RecordBytes: 10}, t0)
	s := d.Status
	if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonTranscriptBudgetExceeded || d.Guard != string(v1alpha1.ReasonTranscriptBudgetExceeded) {
		t.Fatalf("want the run ended TranscriptBudgetExceeded by its guard: %s %s %q", s.Phase, s.TerminationReason, d.Guard)
	}
	if want := "transcript budget: the run's transcript holds 2097161 of its 2097152 bytes (limits.maxTranscriptBytes); lead was not started"; s.TerminationMessage != want {
		t.Fatalf("message %q, want %q", s.TerminationMessage, want)
	}
}
