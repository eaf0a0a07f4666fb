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

// branchTook is how long each branch takes, from the fan-out, in the recording.
var branchTook = map[string]time.Duration{"web": 3 * time.Second, "papers": 5 * time.Second}

// recordResearch runs the research team through the core as the operator would: the lead fans
// out, each branch run answers once, the branches join, and the writer ends the run. It
// returns the recording, with the branch runs' own.
func recordResearch(t testing.TB, p *workflow.Plan) Recording {
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
	// Each branch run answers once; they end in the order branchTook says, and the join holds
	// at the first end after which it holds. A branch still running then is cancelled, before
	// its step ends.
	type branchEnd struct {
		i   int
		res workflow.StepResult
		end time.Time
	}
	var ends []branchEnd
	for i, b := range st.Branches {
		res := workflow.StepResult{Agent: b.Agent, Input: fan.Parallel[i].Input, Result: workflow.Result{Output: b.Agent + " found Y", Tokens: 30}}
		ends = append(ends, branchEnd{i, res, at.Add(branchTook[b.Agent])})
	}
	slices.SortFunc(ends, func(a, b branchEnd) int { return a.end.Compare(b.end) })
	runs := map[string]workflow.BranchRun{}
	for _, b := range st.Branches {
		runs[b.Name] = workflow.BranchRun{Found: true, Phase: v1alpha1.PhaseRunning}
	}
	var last time.Time
	joined := false
	for _, e := range ends {
		b := st.Branches[e.i]
		bp, err := p.BranchPlan(&st, e.i)
		if err != nil {
			t.Fatal(err)
		}
		bst := workflow.Start(bp, v1alpha1.AgentRunStatus{}, e.res.Input, rec.Revision, at).Status
		branch := Recording{Run: b.Name, Input: e.res.Input, Started: at, Revision: rec.Revision,
			Branch: &v1alpha1.RunBranch{Parent: rec.Run, Step: 1, Index: int32(e.i + 1), Agent: b.Agent, Depth: 1}}
		if joined {
			bst = workflow.Cancel(bst, "its parent run no longer needs it", last).Status
		} else {
			bst = workflow.Apply(bp, bst, e.res, e.end).Status
			branch.Steps = []workflow.RecordedStep{{Result: e.res, Time: e.end}}
			runs[b.Name] = workflow.BranchRun{Found: true, Phase: bst.Phase, Reason: bst.TerminationReason, Output: bst.Output,
				Tokens: bst.TokensUsed, Steps: bst.StepCount, Handoffs: bst.HandoffCount}
			if d, _ := workflow.Join(p, st, runs, e.end); !workflow.Branching(&d.Status) {
				st, joined, last = d.Status, true, e.end
				keep()
			}
		}
		branch.Path, branch.End = bst.HandoffSequence, bst
		rec.Branches = append(rec.Branches, branch)
	}
	if !joined {
		t.Fatal("recording: the branches did not join")
	}
	write := workflow.StepResult{Agent: "writer", Input: st.Input, Result: workflow.Result{Output: "the report", Tokens: 80}}
	rec.Steps = append(rec.Steps, workflow.RecordedStep{Result: write, Time: last.Add(time.Second)})
	st = workflow.Apply(p, st, write, last.Add(time.Second)).Status
	keep()
	rec.Path, rec.End = path, st
	if st.TerminationReason != v1alpha1.ReasonCompleted {
		t.Fatalf("recording: the run ended %s (%s)", st.TerminationReason, st.TerminationMessage)
	}
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
