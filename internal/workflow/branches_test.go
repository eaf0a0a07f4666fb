package workflow

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// research is a Swarm whose lead fans out to researchers and a critic; the writer ends the run.
func research(join v1alpha1.Join, budget v1alpha1.BranchBudget) *ConfigWrapper {
	return MakeConfig("research", "ns").Agents(
		MakeAgent("lead").HandsOffTo("researcher", "critic", "writer").Parallel(3, budget, join),
		MakeAgent("researcher").HandsOffTo("lead"),
		MakeAgent("critic").HandsOffTo("lead"),
		MakeAgent("writer").Terminator(),
	)
}

func researchPlan(t *testing.T, join v1alpha1.Join, budget v1alpha1.BranchBudget) *Plan {
	t.Helper()
	return mustPlan(t, research(join, budget).MaxCost("1.00")).ForRun("r", "ns", "", "")
}

// fanOutStep is lead's step that fans out to the agents, each with an input of its own.
func fanOutStep(st v1alpha1.AgentRunStatus, agents ...string) StepResult {
	var branches []Branch
	for _, a := range agents {
		branches = append(branches, Branch{Agent: a, Input: "look into " + a})
	}
	return StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: Result{Output: "splitting up", Parallel: branches, Tokens: 100, Cost: "0.10"}}
}

// branching is a run of the plan whose lead fanned out to the agents at t0.
func branching(t *testing.T, p *Plan, agents ...string) v1alpha1.AgentRunStatus {
	t.Helper()
	st := started(p)
	st = Apply(p, st, fanOutStep(st, agents...), t0).Status
	if !Branching(&st) {
		t.Fatalf("after the fan-out: phase %s, last record %+v; want the run branching", st.Phase, st.HandoffSequence[len(st.HandoffSequence)-1])
	}
	return st
}

func ended(phase v1alpha1.RunPhase, reason v1alpha1.TerminationReason, output string) BranchRun {
	return BranchRun{Found: true, Phase: phase, Reason: reason, Message: "the branch's own words", Output: output,
		Tokens: 50, Cost: "0.05", ToolCalls: 1, Steps: 2, Handoffs: 1}
}

var (
	succeededRun = func(output string) BranchRun {
		return ended(v1alpha1.PhaseSucceeded, v1alpha1.ReasonCompleted, output)
	}
	failedRun  = ended(v1alpha1.PhaseFailed, v1alpha1.ReasonLoopDetected, "")
	runningRun = BranchRun{Found: true, Phase: v1alpha1.PhaseRunning}
)

func TestAFanOutIsOneStepThatNamesEachBranchRun(t *testing.T) {
	p := researchPlan(t, v1alpha1.Join{}, "")
	st := branching(t, p, "researcher", "critic")
	if st.StepCount != 1 || st.HandoffCount != 1 || st.BranchesStarted != 2 {
		t.Errorf("steps %d, handoffs %d, branches started %d; want the fan-out counted as 1 step, 1 handoff, 2 branches",
			st.StepCount, st.HandoffCount, st.BranchesStarted)
	}
	last := st.HandoffSequence[len(st.HandoffSequence)-1]
	if last.Outcome != v1alpha1.OutcomeFanOut || last.From != "lead" || last.To != "researcher,critic" {
		t.Errorf("fan-out record = %+v; want FanOut from lead to researcher,critic", last)
	}
	want := []v1alpha1.BranchStatus{
		{Name: "r-b1-1", Agent: "researcher", InputDigest: InputDigest("look into researcher"), Phase: v1alpha1.PhasePending},
		{Name: "r-b1-2", Agent: "critic", InputDigest: InputDigest("look into critic"), Phase: v1alpha1.PhasePending},
	}
	if len(st.Branches) != 2 || st.Branches[0] != want[0] || st.Branches[1] != want[1] {
		t.Errorf("branches = %+v; want %+v", st.Branches, want)
	}
	if st.CurrentAgent != "researcher,critic" || st.Input != "" {
		t.Errorf("current agent %q, input %q; want the branches' agents and no input of the run's own", st.CurrentAgent, st.Input)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != ReasonBranching {
		t.Errorf("Progressing reason %q; want %s", c.Reason, ReasonBranching)
	}
	// A branching run takes no step: Join without its branches' ends changes nothing, and a
	// branch's start costs no write.
	d, cancel := Join(p, st, map[string]BranchRun{"r-b1-1": runningRun}, t0.Add(time.Minute))
	if !Branching(&d.Status) || len(cancel) > 0 || !equality.Semantic.DeepEqual(d.Status, st) {
		t.Errorf("join with a branch running: branching %v, cancel %v, status changed %v; want still branching, no change",
			Branching(&d.Status), cancel, !equality.Semantic.DeepEqual(d.Status, st))
	}
	// A branch that waits for people says so in its parent, and then that it goes on.
	waiting := BranchRun{Found: true, Phase: v1alpha1.PhaseAwaitingApproval}
	d, _ = Join(p, st, map[string]BranchRun{"r-b1-1": waiting}, t0.Add(time.Minute))
	if d.Status.Branches[0].Phase != v1alpha1.PhaseAwaitingApproval {
		t.Errorf("a branch at a gate: phase %s in its parent", d.Status.Branches[0].Phase)
	}
	d, _ = Join(p, d.Status, map[string]BranchRun{"r-b1-1": runningRun}, t0.Add(time.Minute))
	if d.Status.Branches[0].Phase != v1alpha1.PhaseRunning {
		t.Errorf("a branch past its gate: phase %s in its parent", d.Status.Branches[0].Phase)
	}
}

func TestAFanOutPastWhatTheConfigAllowsFailsTheStep(t *testing.T) {
	for name, tc := range map[string]struct {
		plan   func(t *testing.T) *Plan
		agents []string
		reason string
	}{
		"an agent with no parallel": {
			plan:   func(t *testing.T) *Plan { return mustPlan(t, team()) },
			agents: []string{"worker", "closer"}, reason: "may not fan out",
		},
		"more than maxBranches": {
			plan:   func(t *testing.T) *Plan { return researchPlan(t, v1alpha1.Join{}, "") },
			agents: []string{"researcher", "critic", "writer", "critic"}, reason: "past its parallel.maxBranches 3",
		},
		"an agent that is not a handoff": {
			plan:   func(t *testing.T) *Plan { return researchPlan(t, v1alpha1.Join{}, "") },
			agents: []string{"researcher", "lead"}, reason: "not one of its handoffs",
		},
		"at limits.maxDepth": {
			plan:   func(t *testing.T) *Plan { return researchPlan(t, v1alpha1.Join{}, "").AsBranch("lead", 2) },
			agents: []string{"researcher"}, reason: "at depth 2, and limits.maxDepth is 2",
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := tc.plan(t)
			st := started(p)
			d := Apply(p, st, fanOutStep(st, tc.agents...), t0)
			s := d.Status
			if Branching(&s) || len(s.Branches) != 0 || s.BranchesStarted != 0 {
				t.Fatalf("the run branched: %+v", s.Branches)
			}
			last := s.HandoffSequence[len(s.HandoffSequence)-1]
			if s.ErrorCount != 1 || last.Outcome != v1alpha1.OutcomeFailed || !strings.Contains(last.Reason, tc.reason) {
				t.Errorf("errors %d, record %+v; want a failed step saying %q", s.ErrorCount, last, tc.reason)
			}
		})
	}
}

func TestTheRunsBranchesAreLimitedInAll(t *testing.T) {
	c := research(v1alpha1.Join{}, "")
	c.Spec.Limits.MaxBranches = new(int32(3))
	p := mustPlan(t, c).ForRun("r", "ns", "", "")
	st := branching(t, p, "researcher", "critic")
	d, _ := Join(p, st, map[string]BranchRun{"r-b1-1": succeededRun("a"), "r-b1-2": succeededRun("b")}, t0)
	st = d.Status
	st = Apply(p, st, fanOutStep(st, "researcher", "critic"), t0).Status
	if Branching(&st) || st.BranchesStarted != 2 {
		t.Fatalf("a second fan-out of 2 past maxBranches 3 started: %+v", st.Branches)
	}
	if last := st.HandoffSequence[len(st.HandoffSequence)-1]; !strings.Contains(last.Reason, "has started 2 of limits.maxBranches 3") {
		t.Errorf("record reason %q; want the total named", last.Reason)
	}
}

func TestSharesDivideWhatRemainsAndNeverTheMoneyTwice(t *testing.T) {
	for name, tc := range map[string]struct {
		budget                  v1alpha1.BranchBudget
		steps, handoffs, tokens int64
	}{
		// 25 steps less the fan-out, 20 handoffs less 1, 50,000 tokens less 100; cost 1.00 less 0.10.
		"Split divides it":            {budget: v1alpha1.BudgetSplit, steps: 24 / 2, handoffs: 19 / 2, tokens: 49900 / 2},
		"Shared gives each all of it": {budget: v1alpha1.BudgetShared, steps: 24, handoffs: 19, tokens: 49900},
	} {
		t.Run(name, func(t *testing.T) {
			p := researchPlan(t, v1alpha1.Join{}, tc.budget)
			st := branching(t, p, "researcher", "critic")
			shares := Shares(p, &st)
			if len(shares) != 2 {
				t.Fatalf("%d shares for 2 branches", len(shares))
			}
			s := shares[1]
			if int64(*s.MaxSteps) != tc.steps || int64(*s.MaxHandoffs) != tc.handoffs || *s.MaxTokens != tc.tokens {
				t.Errorf("share: steps %d, handoffs %d, tokens %d; want %d, %d, %d", *s.MaxSteps, *s.MaxHandoffs, *s.MaxTokens, tc.steps, tc.handoffs, tc.tokens)
			}
			if s.MaxCost == nil || *s.MaxCost != "0.45" {
				t.Errorf("cost share %v; want 0.45, half of the 0.90 left whatever the budget", s.MaxCost)
			}
			if s.Timeout == nil || *s.Timeout != "10m0s" || *s.MaxDepth != 2 {
				t.Errorf("timeout %v, depth %v; want the run's deadline from the fan-out, and its maxDepth", s.Timeout, s.MaxDepth)
			}
		})
	}
}

func TestAllJoinsOnceEveryBranchSucceededInTheOrderGiven(t *testing.T) {
	p := researchPlan(t, v1alpha1.Join{Agent: "writer"}, "")
	st := branching(t, p, "researcher", "critic")
	d, cancel := Join(p, st, map[string]BranchRun{"r-b1-2": succeededRun("weak points")}, t0.Add(time.Second))
	if !Branching(&d.Status) || len(cancel) > 0 {
		t.Fatalf("with one branch of two: branching %v, cancel %v; want still waiting, nothing cancelled", Branching(&d.Status), cancel)
	}
	d, cancel = Join(p, d.Status, map[string]BranchRun{"r-b1-1": succeededRun("sources"), "r-b1-2": succeededRun("weak points")}, t0.Add(2*time.Second))
	s := d.Status
	if Branching(&s) || len(cancel) != 0 || s.Phase != v1alpha1.PhaseRunning || s.CurrentAgent != "writer" {
		t.Fatalf("after the join: branching %v, cancel %v, %s, agent %s; want the writer's turn", Branching(&s), cancel, s.Phase, s.CurrentAgent)
	}
	i, j := strings.Index(s.Input, "## Branch 1: researcher (Completed)\n\nsources"), strings.Index(s.Input, "## Branch 2: critic (Completed)\n\nweak points")
	if i < 0 || j < i {
		t.Errorf("join input %q; want each branch under its heading, in the order given", s.Input)
	}
	last := s.HandoffSequence[len(s.HandoffSequence)-1]
	if last.Outcome != v1alpha1.OutcomeJoined || last.From != "researcher,critic" || last.To != "writer" || last.Reason != "joined 2 of 2 branches (All)" {
		t.Errorf("join record %+v", last)
	}
	// The branches' use is the run's: 100 + 2×50 tokens, 0.10 + 2×0.05, 2×2 steps, 1 + 2×1 handoffs.
	if s.TokensUsed != 200 || s.Cost != "0.2" || s.BranchSteps != 4 || s.HandoffCount != 3 || s.ToolCalls != 2 {
		t.Errorf("tokens %d, cost %s, branch steps %d, handoffs %d, tool calls %d; want 200, 0.2, 4, 3, 2",
			s.TokensUsed, s.Cost, s.BranchSteps, s.HandoffCount, s.ToolCalls)
	}
	if next := Next(p, &s); next.Agent != "writer" || next.Input != s.Input {
		t.Errorf("next step %+v; want the writer with the join's input", next)
	}
}

func TestAFailedBranchFailsTheRunOrIsPassedOn(t *testing.T) {
	t.Run("Fail ends the run BranchFailed and cancels the rest", func(t *testing.T) {
		p := researchPlan(t, v1alpha1.Join{}, "")
		st := branching(t, p, "researcher", "critic", "researcher")
		d, cancel := Join(p, st, map[string]BranchRun{"r-b1-1": runningRun, "r-b1-2": failedRun}, t0.Add(time.Second))
		s := d.Status
		if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonBranchFailed {
			t.Fatalf("%s/%s; want Failed/BranchFailed", s.Phase, s.TerminationReason)
		}
		if s.TerminationMessage != "branch r-b1-2 (agent critic) ended LoopDetected: the branch's own words" {
			t.Errorf("message %q; want the branch, its reason and its words", s.TerminationMessage)
		}
		if strings.Join(cancel, " ") != "r-b1-1 r-b1-3" || strings.Join(BranchesToCancel(&s), " ") != "r-b1-1 r-b1-3" {
			t.Errorf("cancel %v, to cancel %v; want the two still running", cancel, BranchesToCancel(&s))
		}
		if s.TokensUsed != 150 {
			t.Errorf("tokens %d; want the failed branch's use counted", s.TokensUsed)
		}
	})
	t.Run("Continue joins once every branch ended, saying which failed", func(t *testing.T) {
		p := researchPlan(t, v1alpha1.Join{OnFailure: v1alpha1.JoinContinue}, "")
		st := branching(t, p, "researcher", "critic")
		d, _ := Join(p, st, map[string]BranchRun{"r-b1-1": runningRun, "r-b1-2": failedRun}, t0.Add(time.Second))
		if !Branching(&d.Status) {
			t.Fatal("joined before every branch ended")
		}
		d, _ = Join(p, d.Status, map[string]BranchRun{"r-b1-1": succeededRun("sources"), "r-b1-2": failedRun}, t0.Add(2*time.Second))
		s := d.Status
		if s.Phase != v1alpha1.PhaseRunning || s.CurrentAgent != "lead" {
			t.Fatalf("%s, agent %s; want lead's turn (the join agent defaults to the fanning agent)", s.Phase, s.CurrentAgent)
		}
		if !strings.Contains(s.Input, "## Branch 2: critic (LoopDetected)\n\nNo output: the branch's own words") {
			t.Errorf("join input %q; want the failed branch passed on with why", s.Input)
		}
	})
}

func TestFirstAndQuorumJoinEarlyAndCancelTheRest(t *testing.T) {
	p := researchPlan(t, v1alpha1.Join{Mode: v1alpha1.JoinFirst}, "")
	st := branching(t, p, "researcher", "critic")
	d, cancel := Join(p, st, map[string]BranchRun{"r-b1-1": runningRun, "r-b1-2": succeededRun("fast")}, t0.Add(time.Second))
	if Branching(&d.Status) || strings.Join(cancel, " ") != "r-b1-1" {
		t.Fatalf("First: branching %v, cancel %v; want joined, r-b1-1 cancelled", Branching(&d.Status), cancel)
	}
	if !strings.Contains(d.Status.Input, "## Branch 1: researcher (cancelled: not needed for the join)") {
		t.Errorf("join input %q; want the cancelled branch named", d.Status.Input)
	}

	p = researchPlan(t, v1alpha1.Join{Mode: v1alpha1.JoinQuorum, Quorum: 2, OnFailure: v1alpha1.JoinContinue}, "")
	st = branching(t, p, "researcher", "critic", "researcher")
	runs := map[string]BranchRun{"r-b1-1": failedRun, "r-b1-2": succeededRun("one"), "r-b1-3": runningRun}
	d, _ = Join(p, st, runs, t0.Add(time.Second))
	if !Branching(&d.Status) {
		t.Fatal("Quorum 2 joined with one success")
	}
	runs["r-b1-3"] = succeededRun("two")
	d, cancel = Join(p, d.Status, runs, t0.Add(2*time.Second))
	if Branching(&d.Status) || len(cancel) != 0 || d.Status.HandoffSequence[len(d.Status.HandoffSequence)-1].Reason != "joined 2 of 3 branches (Quorum)" {
		t.Errorf("Quorum 2 of 3: branching %v, cancel %v", Branching(&d.Status), cancel)
	}
}

func TestTheJoinTimesOut(t *testing.T) {
	timeout := v1alpha1.Duration("1m")
	for name, tc := range map[string]struct {
		onFailure v1alpha1.JoinFailurePolicy
		phase     v1alpha1.RunPhase
	}{
		"failing the run":       {onFailure: v1alpha1.JoinFail, phase: v1alpha1.PhaseFailed},
		"or joining what ended": {onFailure: v1alpha1.JoinContinue, phase: v1alpha1.PhaseRunning},
	} {
		t.Run(name, func(t *testing.T) {
			p := researchPlan(t, v1alpha1.Join{Timeout: &timeout, OnFailure: tc.onFailure}, "")
			st := branching(t, p, "researcher", "critic")
			if at, ok := JoinDeadline(p, &st); !ok || !at.Equal(t0.Add(time.Minute)) {
				t.Fatalf("join deadline %v %v; want a minute after the fan-out", at, ok)
			}
			runs := map[string]BranchRun{"r-b1-1": succeededRun("a"), "r-b1-2": runningRun}
			if d, _ := Join(p, st, runs, t0.Add(59*time.Second)); !Branching(&d.Status) {
				t.Fatal("ended before the join timeout")
			}
			d, cancel := Join(p, st, runs, t0.Add(time.Minute))
			if d.Status.Phase != tc.phase || strings.Join(cancel, " ") != "r-b1-2" {
				t.Fatalf("%s, cancel %v; want %s and the running branch cancelled", d.Status.Phase, cancel, tc.phase)
			}
			if tc.phase == v1alpha1.PhaseFailed && d.Status.TerminationMessage != "the join timed out after 1m0s: 1 of 2 branches ended" {
				t.Errorf("message %q", d.Status.TerminationMessage)
			}
		})
	}
}

func TestTheBranchesUseCountsAgainstTheRunsLimitsAtTheJoin(t *testing.T) {
	p := mustPlan(t, research(v1alpha1.Join{}, "").MaxTokens(1000)).ForRun("r", "ns", "", "")
	st := branching(t, p, "researcher", "critic")
	big := succeededRun("a")
	big.Tokens = 600
	d, _ := Join(p, st, map[string]BranchRun{"r-b1-1": big, "r-b1-2": big}, t0.Add(time.Second))
	if d.Status.TerminationReason != v1alpha1.ReasonTokenBudgetExceeded {
		t.Errorf("%s/%s with 1,300 of 1,000 tokens used; want TokenBudgetExceeded at the join", d.Status.Phase, d.Status.TerminationReason)
	}
}

func TestBranchNamesAndParentLabelsStayValid(t *testing.T) {
	long := strings.Repeat("a", 253)
	if n := BranchName(long, 12, 16); len(n) > 253 || !strings.HasSuffix(n, "-b12-16") {
		t.Errorf("branch name %q (%d characters)", n, len(n))
	}
	if BranchName(long, 1, 1) == BranchName(strings.Repeat("a", 252)+"b", 1, 1) {
		t.Error("two parents cut to one name share their branches' names")
	}
	if l := ParentLabel(long); len(l) > 63 {
		t.Errorf("parent label %q (%d characters)", l, len(l))
	}
	if ParentLabel("short") != "short" || BranchName("r", 3, 2) != "r-b3-2" {
		t.Error("a short name is changed")
	}
}

func TestABranchStartsAtItsAgentAndItsFirstPlainAnswerIsItsOutput(t *testing.T) {
	p := researchPlan(t, v1alpha1.Join{}, "").AsBranch("researcher", 1)
	st := Start(p, v1alpha1.AgentRunStatus{}, "look into it", "research-rev", t0).Status
	if st.CurrentAgent != "researcher" {
		t.Fatalf("a branch starts at %s; want researcher", st.CurrentAgent)
	}
	d := Apply(p, st, StepResult{Agent: "researcher", Input: st.Input, Result: Result{Output: "three sources", Tokens: 10}}, t0)
	s := d.Status
	if s.Phase != v1alpha1.PhaseSucceeded || s.Output != "three sources" || s.TerminationMessage != "researcher gave the branch's answer at step 1" {
		t.Errorf("%s, output %q, message %q; want the branch ended with researcher's answer", s.Phase, s.Output, s.TerminationMessage)
	}
	// The same answer in the run that is no branch goes back to the entrypoint.
	top := researchPlan(t, v1alpha1.Join{}, "")
	st = at(top, "researcher")
	if s := Apply(top, st, StepResult{Agent: "researcher", Input: st.Input, Result: Result{Output: "three sources"}}, t0).Status; s.Phase != v1alpha1.PhaseRunning || s.CurrentAgent != "lead" {
		t.Errorf("outside a branch: %s, agent %s; want control back at lead", s.Phase, s.CurrentAgent)
	}
}

func TestAStepIsOfferedOnlyTheBranchesTheRunMayStillStart(t *testing.T) {
	c := research(v1alpha1.Join{}, "")
	c.Spec.Limits.MaxBranches = new(int32(5))
	p := mustPlan(t, c).ForRun("r", "ns", "", "")
	st := started(p)
	if n := Next(p, &st).MaxBranches; n != 3 {
		t.Errorf("lead may ask for %d branches; want its maxBranches 3", n)
	}
	st.BranchesStarted = 4
	if n := Next(p, &st).MaxBranches; n != 1 {
		t.Errorf("with 4 of 5 branches started, lead may ask for %d; want 1", n)
	}
	if n := Next(p.AsBranch("lead", 2), &st).MaxBranches; n != 0 {
		t.Errorf("at limits.maxDepth, lead may ask for %d branches; want none", n)
	}
	worker := at(p, "researcher")
	if n := Next(p, &worker).MaxBranches; n != 0 {
		t.Errorf("an agent without parallel may ask for %d branches; want none", n)
	}
}

func TestAFanOutIsNotHeldToTheAgentsOutputSchemaAndEachBranchNeedsAnInput(t *testing.T) {
	c := research(v1alpha1.Join{}, "")
	c.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["answer"]}`)}
	p := mustPlan(t, c).ForRun("r", "ns", "", "")
	st := started(p)
	if s := Apply(p, st, fanOutStep(st, "researcher", "critic"), t0).Status; !Branching(&s) {
		t.Fatalf("a fan-out of an agent with an outputSchema did not branch: %+v", s.HandoffSequence)
	}
	res := fanOutStep(st, "researcher", "critic")
	res.Parallel[1].Input = "  "
	s := Apply(p, st, res, t0).Status
	if last := s.HandoffSequence[len(s.HandoffSequence)-1]; Branching(&s) || !strings.Contains(last.Reason, "branch 2 (agent critic) has no input") {
		t.Errorf("a branch with no input: branching %v, record %+v", Branching(&s), last)
	}
}

func TestSixteenBranchesOfTheLongestNamesFitTheStatus(t *testing.T) {
	name := strings.Repeat("a", 63)
	agents := make([]string, v1alpha1.MaxBranchesPerFanOut)
	for i := range agents {
		agents[i] = name
	}
	if got := len(strings.Join(agents, listSeparator)); got > 1040 {
		t.Errorf("the agents of a fan-out of 16 take %d bytes; status.currentAgent and a record's to hold 1040", got)
	}
}
