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
// run's approvals and creator), and the branches join as the operator joins them. A branch the
// recording does not hold (another step, agent or input), or one whose replay stops, stops the
// replay. A branch's turns are never answered live.
//
// The operator looks at a branching run when a branch ends, at the join's deadline and at the
// run's: each time, the run's guards first, then the join with the branches its cache shows
// ended. The replay looks at the same moments. Branches that ended just before the recorded
// join are seen together at its time, so that a First or Quorum join that folded several
// branches at once folds them again.

// BranchReport is what the replay of one branch found.
type BranchReport struct {
	// Name is the recorded branch run; Step and Index the fan-out step and the branch's place.
	Name  string `json:"name"`
	Agent string `json:"agent"`
	Step  int32  `json:"step"`
	Index int32  `json:"index"`
	// Open is set for a branch the recorded run cancelled before it ended (a join that did
	// not need it, or the run's end): it is replayed as far as it ran.
	Open bool `json:"open,omitempty"`
	Report
}

// reproduced reports whether the branch's replay is its recording: the same run, or, for an
// open branch, the same path as far as it ran.
func (b BranchReport) reproduced() bool {
	if b.Open {
		return b.Diverged == 0 && b.Stopped == ""
	}
	return b.Same()
}

// endedBranch is a branch replayed to its end, at; open is set for one whose recording ends
// before it does, because the recorded run cancelled it at at.
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
	var open *endedBranch
	for i := range r.st.Branches {
		e, ok := r.replayBranch(step, i)
		switch {
		case !ok:
			return
		case !e.open:
			ended = append(ended, e)
		case open == nil || e.at.Before(open.at):
			// What an open branch did past its cancel is not recorded: the replay can look
			// at the run only until the first is cancelled.
			open = &e
		}
	}
	runs := make(map[string]workflow.BranchRun, len(r.st.Branches))
	for _, b := range r.st.Branches {
		runs[b.Name] = workflow.BranchRun{Found: true, Phase: v1alpha1.PhaseRunning}
	}
	for _, at := range r.moments(step, ended) {
		if open != nil && at.After(open.at) {
			break
		}
		if r.lookAt(at, runs, ended) {
			return
		}
	}
	if open != nil {
		r.stop("the join of step %d's branches needs branch %s, which the recorded run cancelled before it ended", step, open.name)
		return
	}
	r.stop("the branches of step %d ended, and their join does not hold", step)
}

// moments are the times the operator looks at the branching run, in order: when a branch ends,
// the join's deadline and the run's. A branch that ended within seenTogether before the
// recorded join is taken as seen at the join, with the branch whose end made it.
func (r *runner) moments(step int32, ended []endedBranch) []time.Time {
	joinedAt, recorded := r.recordedJoin(step)
	var out []time.Time
	for i, e := range ended {
		if recorded && !e.at.After(joinedAt) && joinedAt.Sub(e.at) < seenTogether {
			ended[i].at = joinedAt
		}
		out = append(out, ended[i].at)
	}
	if at, ok := workflow.JoinDeadline(r.p, &r.st); ok {
		out = append(out, at)
	}
	if at, ok := workflow.Deadline(r.p, &r.st); ok {
		out = append(out, at)
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.Compact(out)
}

// seenTogether is how close before the recorded join a branch's end is taken as seen with it:
// the operator reads branch ends from its cache a reconcile after they are written, and ends
// that close are decided on together.
const seenTogether = time.Second

// recordedJoin is when the recorded run joined the branches of its fan-out at step, if it did.
func (r *runner) recordedJoin(step int32) (time.Time, bool) {
	for _, h := range r.rec.Path {
		if h.Step == step && h.Outcome == v1alpha1.OutcomeJoined {
			return h.Time.Time, true
		}
	}
	return time.Time{}, false
}

// lookAt looks at the branching run at time at as the operator would: the run's guards, then
// the join with the branches ended by then. It reports whether the run stopped branching, and
// applies what it came to.
func (r *runner) lookAt(at time.Time, runs map[string]workflow.BranchRun, ended []endedBranch) bool {
	if r.now.After(at) {
		at = r.now
	}
	if d, tripped := workflow.Check(r.p, r.st, at); tripped {
		r.now = at
		r.apply(d)
		return true
	}
	for _, e := range ended {
		if !e.at.After(at) {
			runs[e.name] = e.run
		}
	}
	d, _ := workflow.Join(r.p, r.st, runs, at)
	if workflow.Branching(&d.Status) && !d.Status.Phase.Terminal() {
		return false
	}
	r.now = at
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
	report := BranchReport{Name: rec.Run, Agent: b.Agent, Step: step, Index: int32(i + 1)}
	if rec.Started.IsZero() {
		// Cancelled before it started: nothing of it was recorded, or ran.
		report.Open, report.Report = true, Report{Recorded: summary(rec.End, nil, nil), Replayed: Summary{Phase: v1alpha1.PhasePending}}
		r.branches = append(r.branches, report)
		return endedBranch{name: b.Name, open: true, at: cancelled(rec)}, true
	}
	p, err := r.p.BranchPlan(&r.st, i)
	if err != nil {
		r.stop("step %d's branch %d: %v", step, i+1, err)
		return endedBranch{}, false
	}
	sub := newRunner(p, rec, Options{})
	sub.run()
	if sub.err != nil {
		r.err = sub.err
		r.stop("branch %s (%s): %s", rec.Run, b.Agent, sub.stopped)
		return endedBranch{}, false
	}
	report.Report = sub.report()
	// A branch the recorded run cancelled is replayed as far as its recording goes: only a
	// replay that ran out of recording before it ended is open; one that stopped for another
	// reason stopped.
	report.Open = sub.exhausted && rec.End.Phase == v1alpha1.PhaseCancelled
	if report.Open {
		report.Stopped = ""
	}
	r.branches = append(r.branches, report)
	switch {
	case report.Open:
		return endedBranch{name: b.Name, open: true, at: cancelled(rec)}, true
	case sub.stopped != "":
		r.stop("branch %s (%s): %s", rec.Run, b.Agent, sub.stopped)
		return endedBranch{}, false
	case !sub.st.Phase.Terminal():
		r.stop("branch %s (%s) is %s when its recording ends", rec.Run, b.Agent, sub.st.Phase)
		return endedBranch{}, false
	}
	st := &sub.st
	at := sub.now
	if report.Same() && rec.End.CompletionTime != nil {
		// As the operator saw it end.
		at = rec.End.CompletionTime.Time
	}
	return endedBranch{name: b.Name, at: at, run: workflow.BranchRun{Found: true, Phase: st.Phase, Reason: st.TerminationReason,
		Message: st.TerminationMessage, Output: st.Output, Tokens: st.TokensUsed, Cost: st.Cost, ToolCalls: st.ToolCalls,
		Steps: st.StepCount + st.BranchSteps, Handoffs: st.HandoffCount, Taint: st.Taint}}, true
}

// cancelled is when the recorded run cancelled a branch: its end (the zero time, before any
// moment, when the record does not say).
func cancelled(rec Recording) time.Time {
	if t := rec.End.CompletionTime; t != nil {
		return t.Time
	}
	return time.Time{}
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
