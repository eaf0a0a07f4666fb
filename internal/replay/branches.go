package replay

import (
	"slices"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run that fans out is replayed with its branches: each branch of the replayed fan-out is
// replayed from the recording of the branch run the recorded fan-out made at the same step and
// place, on the plan the operator would have made its run (its share of the run's limits, the
// run's approvals and creator), and the branches join as the operator joins them, in the order
// they ended, until the join holds. A branch the recording does not hold (another step, agent
// or input), or one whose replay stops, stops the replay. A branch's turns are never answered
// live.

// BranchReport is what the replay of one branch found.
type BranchReport struct {
	// Name is the recorded branch run; Step and Index the fan-out step and the branch's place.
	Name  string `json:"name"`
	Agent string `json:"agent"`
	Step  int32  `json:"step"`
	Index int32  `json:"index"`
	Report
}

// endedBranch is a branch replayed to its end; open is set for one whose recording ends
// before it does because the recorded run cancelled it (a join that did not need it): it runs
// on, as far as the replay can tell.
type endedBranch struct {
	name string
	run  workflow.BranchRun
	at   time.Time
	open bool
}

// join replays the branches of the run's current fan-out and joins them.
func (r *runner) join() {
	step := r.st.HandoffSequence[len(r.st.HandoffSequence)-1].Step
	var ended []endedBranch
	var open []string
	for i := range r.st.Branches {
		e, ok := r.replayBranch(step, i)
		switch {
		case !ok:
			return
		case e.open:
			open = append(open, e.name)
		default:
			ended = append(ended, e)
		}
	}
	// The operator's join sees branches end one after another: it holds at the first end
	// after which it holds.
	slices.SortStableFunc(ended, func(a, b endedBranch) int { return a.at.Compare(b.at) })
	runs := make(map[string]workflow.BranchRun, len(ended))
	for _, b := range r.st.Branches {
		runs[b.Name] = workflow.BranchRun{Found: true, Phase: v1alpha1.PhaseRunning}
	}
	// A join's timeout comes at its deadline, between the branches' ends.
	deadline, timed := workflow.JoinDeadline(r.p, &r.st)
	for _, e := range ended {
		if timed && e.at.After(deadline) && r.joined(runs, deadline) {
			return
		}
		runs[e.name] = e.run
		if r.joined(runs, e.at) {
			return
		}
	}
	switch {
	case timed && r.joined(runs, deadline):
	case len(open) > 0:
		r.stop("the join of step %d's branches needs branch %s, which the recorded run cancelled before it ended", step, open[0])
	default:
		r.stop("the branches of step %d ended, and their join does not hold", step)
	}
}

// joined reports whether the join holds at now (or the replay's time, if later) with the
// branches' runs as they are then, and applies it if it does.
func (r *runner) joined(runs map[string]workflow.BranchRun, now time.Time) bool {
	if r.now.After(now) {
		now = r.now
	}
	d, _ := workflow.Join(r.p, r.st, runs, now)
	if workflow.Branching(&d.Status) && !d.Status.Phase.Terminal() {
		return false
	}
	r.now = now
	r.apply(d)
	return true
}

// replayBranch replays branch i of the fan-out at step from its recording. ok is false when
// the replay stopped.
func (r *runner) replayBranch(step int32, i int) (endedBranch, bool) {
	b := r.st.Branches[i]
	rec, found := r.branchRecording(step, int32(i+1))
	switch {
	case !found:
		r.stop("step %d fans out to branch %d (%s), and the recording holds no branch run of step %d's place %d", step, i+1, b.Agent, step, i+1)
		return endedBranch{}, false
	case rec.Branch.Agent != b.Agent || workflow.InputDigest(rec.Input) != b.InputDigest:
		r.stop("step %d's branch %d is %s's with another input than the recorded branch %s had", step, i+1, b.Agent, rec.Run)
		return endedBranch{}, false
	}
	p, err := r.p.BranchPlan(&r.st, i)
	if err != nil {
		r.stop("step %d's branch %d: %v", step, i+1, err)
		return endedBranch{}, false
	}
	sub := newRunner(p, rec, Options{})
	sub.run()
	report := sub.report()
	open := !sub.st.Phase.Terminal() && rec.End.Phase == v1alpha1.PhaseCancelled
	if open {
		// Replayed as far as it ran before the recorded run cancelled it.
		report.Stopped = ""
	}
	r.branches = append(r.branches, BranchReport{Name: rec.Run, Agent: b.Agent, Step: step, Index: int32(i + 1), Report: report})
	switch {
	case open:
		return endedBranch{name: b.Name, open: true}, true
	case sub.stopped != "":
		r.stop("branch %s (%s): %s", rec.Run, b.Agent, sub.stopped)
		return endedBranch{}, false
	case !sub.st.Phase.Terminal():
		r.stop("branch %s (%s) is %s when its recording ends", rec.Run, b.Agent, sub.st.Phase)
		return endedBranch{}, false
	}
	st := &sub.st
	return endedBranch{name: b.Name, at: sub.now, run: workflow.BranchRun{Found: true, Phase: st.Phase, Reason: st.TerminationReason,
		Message: st.TerminationMessage, Output: st.Output, Tokens: st.TokensUsed, Cost: st.Cost, ToolCalls: st.ToolCalls,
		Steps: st.StepCount + st.BranchSteps, Handoffs: st.HandoffCount}}, true
}

// branchRecording is the recording of the branch run the recorded fan-out at step made at
// place index.
func (r *runner) branchRecording(step, index int32) (Recording, bool) {
	for _, b := range r.rec.Branches {
		if b.Branch != nil && b.Branch.Step == step && b.Branch.Index == index {
			return b, true
		}
	}
	return Recording{}, false
}
