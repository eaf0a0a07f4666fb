package replay

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// research is a Swarm whose lead fans out to a web and a papers researcher, and the writer
// joins them and ends the run with what they found.
func research(maxBranches int32, join v1alpha1.Join) *ConfigWrapper {
	join.Agent = "writer"
	return MakeConfig("research", "ns").Agents(
		MakeAgent("lead").HandsOffTo("web", "papers", "writer").Parallel(maxBranches, "", join),
		MakeAgent("web").HandsOffTo("lead"),
		MakeAgent("papers").HandsOffTo("lead"),
		MakeAgent("writer").Terminator(),
	)
}

// operator says how the recorded run went: how long each branch took from the fan-out, and
// when the operator looked at the branching run (from the fan-out; each branch's end when
// none are given).
type operator struct {
	took  map[string]time.Duration
	looks []time.Duration
}

// branchTook is how long each branch takes, from the fan-out, unless a test says otherwise.
var branchTook = map[string]time.Duration{"web": 3 * time.Second, "papers": 5 * time.Second}

// recordResearch records the research team as the operator runs it, each branch taking
// branchTook and each end looked at as it comes.
func recordResearch(t testing.TB, p *workflow.Plan) Recording {
	return recordResearchAs(t, p, operator{took: branchTook})
}

// recordResearchAs runs the research team through the core as the operator would: the lead
// fans out, each branch run answers once; at each look, the run's guards, then the join with
// the branches ended by then; the branches still running when the run joins or ends are
// cancelled then; the writer ends the run. It returns the recording, with the branch runs'.
func recordResearchAs(t testing.TB, p *workflow.Plan, op operator) Recording {
	t.Helper()
	rec := Recording{Run: "ticket", Input: "what is known about X", Started: t0, Revision: "research-1"}
	st := workflow.Start(p, v1alpha1.AgentRunStatus{}, rec.Input, rec.Revision, t0).Status
	var path []v1alpha1.HandoffRecord
	keep := func() { path = appendLater(path, st.HandoffSequence) }
	fan := workflow.StepResult{Agent: "lead", Input: rec.Input, Result: workflow.Result{Output: "splitting up", Tokens: 100,
		Parallel: []workflow.Branch{{Agent: "web", Input: "search the web for X"}, {Agent: "papers", Input: "search papers on X"}}}}
	at := t0.Add(time.Second)
	rec.Steps = append(rec.Steps, workflow.RecordedStep{Result: fan, Time: at})
	st = workflow.Apply(p, st, fan, at).Status
	keep()
	if !workflow.Branching(&st) {
		t.Fatalf("recording: the lead's step did not fan out: %s %+v", st.Phase, st.HandoffSequence)
	}
	looks := op.looks
	if looks == nil {
		for _, b := range st.Branches {
			looks = append(looks, op.took[b.Agent])
		}
		slices.Sort(looks)
	}
	branches := make([]Recording, len(st.Branches))
	runs := map[string]workflow.BranchRun{}
	for i, b := range st.Branches {
		bp, err := p.BranchPlan(&st, i)
		if err != nil {
			t.Fatal(err)
		}
		input := fan.Parallel[i].Input
		branches[i] = Recording{Run: b.Name, Input: input, Started: at, Revision: rec.Revision,
			End:    workflow.Start(bp, v1alpha1.AgentRunStatus{}, input, rec.Revision, at).Status,
			Branch: &v1alpha1.RunBranch{Parent: rec.Run, Step: 1, Index: int32(i + 1), Agent: b.Agent, Depth: 1}}
		runs[b.Name] = workflow.BranchRun{Found: true, Phase: v1alpha1.PhaseRunning}
	}
	var last time.Time
	for _, look := range looks {
		now := at.Add(look)
		if d, tripped := workflow.Check(p, st, now); tripped {
			st, last = d.Status, now
			keep()
			break
		}
		for i, b := range st.Branches {
			ends := at.Add(op.took[b.Agent])
			if ends.After(now) || len(branches[i].Steps) > 0 {
				continue
			}
			bp, _ := p.BranchPlan(&st, i)
			res := workflow.StepResult{Agent: b.Agent, Input: branches[i].Input, Result: workflow.Result{Output: b.Agent + " found Y", Tokens: 30}}
			branches[i].Steps = []workflow.RecordedStep{{Result: res, Time: ends}}
			end := workflow.Apply(bp, branches[i].End, res, ends).Status
			branches[i].End, branches[i].Path = end, end.HandoffSequence
			runs[b.Name] = workflow.BranchRun{Found: true, Phase: end.Phase, Reason: end.TerminationReason, Output: end.Output,
				Tokens: end.TokensUsed, Steps: end.StepCount, Handoffs: end.HandoffCount}
		}
		if d, _ := workflow.Join(p, st, runs, now); !workflow.Branching(&d.Status) {
			st, last = d.Status, now
			keep()
			break
		}
	}
	if last.IsZero() {
		t.Fatal("recording: the run neither joined nor ended")
	}
	for i := range branches {
		if !branches[i].End.Phase.Terminal() {
			branches[i].End = workflow.Cancel(branches[i].End, "its parent run no longer needs it", last).Status
		}
	}
	rec.Branches = branches
	if st.Phase == v1alpha1.PhaseRunning {
		write := workflow.StepResult{Agent: "writer", Input: st.Input, Result: workflow.Result{Output: "the report", Tokens: 80}}
		rec.Steps = append(rec.Steps, workflow.RecordedStep{Result: write, Time: last.Add(time.Second)})
		st = workflow.Apply(p, st, write, last.Add(time.Second)).Status
		keep()
	}
	rec.Path, rec.End = path, st
	return rec
}

func TestAFanOutReplaysWithItsBranchesRecordings(t *testing.T) {
	p := plan(t, research(2, v1alpha1.Join{}))
	rec := recordResearch(t, p)
	r := Run(p, rec, Options{})
	if !r.Same() {
		t.Fatalf("on the same config: diverged at %d, stopped %q; recorded %s %d tokens, replayed %s %d tokens",
			r.Diverged, r.Stopped, pathOf(r.Recorded.Path), r.Recorded.Tokens, pathOf(r.Replayed.Path), r.Replayed.Tokens)
	}
	if r.Replayed.Tokens != 100+30+30+80 || len(r.Branches) != 2 {
		t.Errorf("replayed %d tokens, %d branches", r.Replayed.Tokens, len(r.Branches))
	}
	for _, b := range r.Branches {
		if !b.Same() || b.Replayed.Output != b.Agent+" found Y" {
			t.Errorf("branch %s: %+v", b.Name, b.Report)
		}
	}
}

func TestAReplayedFanOutIsJudgedByTheNewConfig(t *testing.T) {
	rec := recordResearch(t, plan(t, research(2, v1alpha1.Join{})))
	// One branch at a time now: the lead's fan-out to two fails its step.
	if r := Run(plan(t, research(1, v1alpha1.Join{})), rec, Options{}); r.Diverged != 1 || r.Same() {
		t.Errorf("maxBranches 1: diverged at %d, replayed %s, stopped %q", r.Diverged, r.Replayed.Reason, r.Stopped)
	}
	// The first branch to end is enough now: the web's, whose tokens alone join the run.
	first := Run(plan(t, research(2, v1alpha1.Join{Mode: v1alpha1.JoinFirst})), rec, Options{})
	if first.Stopped != "" || first.Same() || first.Replayed.Tokens != 100+30+80 {
		t.Errorf("join First: stopped %q, replayed %d tokens", first.Stopped, first.Replayed.Tokens)
	}
	joined := first.Replayed.Path[1]
	if joined.Outcome != v1alpha1.OutcomeJoined || !strings.Contains(joined.Reason, "joined 1 of 2 branches (First)") {
		t.Errorf("join record %+v", joined)
	}
	// A join that times out before the papers come back fails the run.
	timeout := Run(plan(t, research(2, v1alpha1.Join{Timeout: v1alpha1.NewDuration(4 * time.Second)})), rec, Options{})
	if timeout.Replayed.Reason != v1alpha1.ReasonBranchFailed || timeout.Same() {
		t.Errorf("a 4s join timeout: replayed %s (%s), stopped %q", timeout.Replayed.Reason, timeout.Replayed.Message, timeout.Stopped)
	}
}

// A run whose join took the first branch to end replays as it ran: the branch the recorded
// run cancelled is replayed as far as it ran, and not needed.
func TestAFanOutWhoseJoinCancelledABranchReplaysAsItRan(t *testing.T) {
	p := plan(t, research(2, v1alpha1.Join{Mode: v1alpha1.JoinFirst}))
	rec := recordResearch(t, p)
	if rec.End.TokensUsed != 100+30+80 {
		t.Fatalf("recording: %d tokens", rec.End.TokensUsed)
	}
	r := Run(p, rec, Options{})
	if !r.Same() || len(r.Branches) != 2 || r.Branches[1].Stopped != "" || r.Branches[1].Replayed.Phase.Terminal() {
		t.Fatalf("on the same config: diverged at %d, stopped %q, branches %+v", r.Diverged, r.Stopped, r.Branches)
	}
	// A join of all of them needs the branch the recorded run cancelled.
	all := Run(plan(t, research(2, v1alpha1.Join{})), rec, Options{})
	if !strings.Contains(all.Stopped, "needs branch ticket-b1-2, which the recorded run cancelled before it ended") {
		t.Errorf("join All: stopped %q", all.Stopped)
	}
}

func TestAFanOutWhoseBranchTheRecordingLacksStopsTheReplay(t *testing.T) {
	p := plan(t, research(2, v1alpha1.Join{}))
	rec := recordResearch(t, p)
	rec.Branches = rec.Branches[:1]
	r := Run(p, rec, Options{})
	if r.Stopped != "step 1 fans out to branch 2 (papers), and the recording holds no branch run of step 1's place 2" {
		t.Errorf("stopped %q", r.Stopped)
	}
	rec = recordResearch(t, p)
	rec.Branches[0].Input = "something else"
	if r := Run(p, rec, Options{}); !strings.Contains(r.Stopped, "with another input than the recorded branch") {
		t.Errorf("another input: stopped %q", r.Stopped)
	}
}

// The runs the operator really makes, replayed on the config they ran: each reproduces.
func TestRecordedFanOutsReproduceOnTheirConfig(t *testing.T) {
	cases := map[string]struct {
		config *ConfigWrapper
		op     operator
		reason v1alpha1.TerminationReason
		tokens int64
	}{
		// Two ends 100 ms apart, looked at once: a First join folds both.
		"a First join that saw two ends at once": {config: research(2, v1alpha1.Join{Mode: v1alpha1.JoinFirst}),
			op:     operator{took: map[string]time.Duration{"web": 3 * time.Second, "papers": 3100 * time.Millisecond}, looks: []time.Duration{3100 * time.Millisecond}},
			reason: v1alpha1.ReasonCompleted, tokens: 100 + 30 + 30 + 80},
		// The papers branch was cancelled before it started: the join took the web's.
		"a First join that cancelled a branch that never started": {config: research(2, v1alpha1.Join{Mode: v1alpha1.JoinFirst}),
			op:     operator{took: map[string]time.Duration{"web": 2 * time.Second, "papers": time.Minute}},
			reason: v1alpha1.ReasonCompleted, tokens: 100 + 30 + 80},
		// The run's timeout came while both branches ran: the run ended, and cancelled them.
		"a run that timed out while its branches ran": {config: research(2, v1alpha1.Join{}).Timeout(3 * time.Second),
			op:     operator{took: branchTook, looks: []time.Duration{2 * time.Second}},
			reason: v1alpha1.ReasonTimeout, tokens: 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := plan(t, tc.config)
			rec := recordResearchAs(t, p, tc.op)
			if name == "a First join that cancelled a branch that never started" {
				papers := &rec.Branches[1]
				papers.Started, papers.End.StartTime, papers.Steps = time.Time{}, nil, nil
			}
			if rec.End.TerminationReason != tc.reason || rec.End.TokensUsed != tc.tokens {
				t.Fatalf("recording: %s, %d tokens", rec.End.TerminationReason, rec.End.TokensUsed)
			}
			r := Run(p, readBack(t, exportOf(t, rec, tc.config.Obj().Spec)), Options{})
			if !r.Same() {
				t.Fatalf("diverged at %d, stopped %q; replayed %s with %d tokens; branches %+v",
					r.Diverged, r.Stopped, r.Replayed.Reason, r.Replayed.Tokens, r.Branches)
			}
		})
	}
}
