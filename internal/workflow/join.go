package workflow

import (
	"fmt"
	"maps"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// The join of a fan-out's branches (branches.go): when it holds, what the join agent is given,
// and what the branches' use adds to the run's counts.

// BranchRun is what the join reads of one branch's run, as the controller found it.
type BranchRun struct {
	// Found is set when the branch's run exists; a branch whose run is not made yet waits.
	Found bool
	// UID is the run's: the branch's status records it the first time the run is found, and
	// from then on only the run of that UID is the branch's.
	UID string
	// Taken says why the branch has no run it may take: its name is held by a run the operator
	// did not make for this fan-out, or the run it made is gone. The run then fails.
	Taken   string
	Phase   v1alpha1.RunPhase
	Reason  v1alpha1.TerminationReason
	Message string
	// Output is the run's output; Tokens, Cost, ToolCalls, Steps (its own and its branches')
	// and Handoffs what it used.
	Output    string
	Tokens    int64
	Cost      string
	ToolCalls int32
	Steps     int32
	Handoffs  int32
	// Taint is the run's, once tainted: its parent is tainted by the join that reads it.
	Taint *v1alpha1.Taint
}

// Join decides what a branching run does, given its branches' runs by name: status.branches
// records each run's UID the first time it is found, and says their phases as seen; once the
// join holds (join.mode, or, with onFailure Continue, every branch ended), the join agent takes
// the branches' outputs as its next input and their use counts as the run's; a failed branch
// with onFailure Fail ends the run BranchFailed; a branch whose name is taken, or whose run is
// gone, ends it BranchFailed whatever onFailure says, for the branch cannot run at all; past
// join.timeout the run fails, or joins what ended. Cancel names the branches still running that
// the run no longer needs: the controller cancels them once the update is written.
func Join(p *Plan, st v1alpha1.AgentRunStatus, runs map[string]BranchRun, now time.Time) (d Update, cancel []string) {
	d = Update{Status: *st.DeepCopy()}
	if !Branching(&st) {
		return d, nil
	}
	s := &d.Status
	var succeeded, ended int
	var failed []int
	taken := -1
	for i := range s.Branches {
		b := &s.Branches[i]
		r, ok := runs[b.Name]
		if ok && r.Found && b.UID != "" && r.UID != "" && r.UID != b.UID {
			// Never the branch's: the join would take another run's output for it.
			runs = maps.Clone(runs)
			r = BranchRun{Taken: fmt.Sprintf("the run of uid %s holds its name, not the run of uid %s made for it", r.UID, b.UID)}
			runs[b.Name] = r
		}
		if r.Taken != "" && taken < 0 {
			taken = i
		}
		if !ok || !r.Found {
			continue
		}
		if b.UID == "" {
			b.UID = r.UID
		}
		// A branch's start costs its parent no write: its phase is written when the branch
		// ends, and when it starts or stops waiting for people.
		if r.Phase.Terminal() || waitsForPeople(r.Phase) || waitsForPeople(b.Phase) {
			b.Phase = r.Phase
		}
		if r.Phase.Terminal() {
			b.Reason, b.TokensUsed, b.Cost = r.Reason, r.Tokens, r.Cost
			ended++
			if r.Phase == v1alpha1.PhaseSucceeded {
				succeeded++
			} else {
				failed = append(failed, i)
			}
		}
	}
	join := joinOf(p, &st)
	n := len(s.Branches)
	needed := n
	switch join.Mode {
	case v1alpha1.JoinQuorum:
		needed = min(int(join.Quorum), n)
	case v1alpha1.JoinFirst:
		needed = 1
	}
	timedOut := false
	if at, ok := JoinDeadline(p, &st); ok && !now.Before(at) {
		timedOut = true
	}
	switch {
	case taken >= 0:
		b := s.Branches[taken]
		foldBranches(s, runs)
		end(&d, Trip{Reason: v1alpha1.ReasonBranchFailed,
			Message: fmt.Sprintf(takenBranchMessageFormat, b.Name, b.Agent, runs[b.Name].Taken)}, now)
	case join.OnFailure != v1alpha1.JoinContinue && len(failed) > 0:
		b := s.Branches[failed[0]]
		r := runs[b.Name]
		foldBranches(s, runs)
		end(&d, Trip{Reason: v1alpha1.ReasonBranchFailed,
			Message: fmt.Sprintf(failedBranchMessageFormat, b.Name, b.Agent, r.Reason, r.Message)}, now)
	case succeeded >= needed || (join.OnFailure == v1alpha1.JoinContinue && (ended == n || timedOut)):
		joinTaint(s, runs)
		joinBranches(p, &d, runs, join, succeeded, now)
	case timedOut:
		foldBranches(s, runs)
		end(&d, Trip{Reason: v1alpha1.ReasonBranchFailed,
			Message: fmt.Sprintf(joinTimeoutMessageFormat, join.Timeout.OrZero(), ended, n)}, now)
	default:
		return d, nil
	}
	return d, running(s.Branches)
}

// joinOf is the join of the run's latest fan-out, after its defaults.
func joinOf(p *Plan, st *v1alpha1.AgentRunStatus) v1alpha1.Join {
	var j v1alpha1.Join
	if a := p.Agent(fanningAgent(st)); a != nil && a.Parallel != nil {
		j = a.Parallel.Join
	}
	if j.Mode == "" {
		j.Mode = v1alpha1.JoinAll
	}
	if j.OnFailure == "" {
		j.OnFailure = v1alpha1.JoinFail
	}
	if j.Agent == "" {
		j.Agent = fanningAgent(st)
	}
	return j
}

// JoinDeadline is when the run's branches must have joined, if its fan-out's join has a
// timeout: the controller brings the run back then.
func JoinDeadline(p *Plan, st *v1alpha1.AgentRunStatus) (time.Time, bool) {
	if !Branching(st) {
		return time.Time{}, false
	}
	t := joinOf(p, st).Timeout.OrZero()
	at, ok := fanOutTime(st)
	if t <= 0 || !ok {
		return time.Time{}, false
	}
	return at.Add(t), true
}

// joinTaint taints the run with the first of its ended branches that was tainted: the join
// agent reads what they found, in the step after the fan-out.
func joinTaint(s *v1alpha1.AgentRunStatus, runs map[string]BranchRun) {
	for _, b := range s.Branches {
		if r, ok := runs[b.Name]; ok && r.Found && r.Phase.Terminal() && r.Taint != nil {
			t := Inherited(r.Taint, "branch "+b.Name)
			t.Step = s.StepCount + 1
			taint(s, t)
			return
		}
	}
}

// foldBranches adds what the branches that ended used to the run's counts, once: a branch's use
// is folded at the join or at the run's end, and the fan-out's branches are never folded again.
func foldBranches(s *v1alpha1.AgentRunStatus, runs map[string]BranchRun) {
	for _, b := range s.Branches {
		r, ok := runs[b.Name]
		if !ok || !r.Found || !r.Phase.Terminal() {
			continue
		}
		s.TokensUsed += r.Tokens
		s.ToolCalls += r.ToolCalls
		s.BranchSteps += r.Steps
		s.HandoffCount += r.Handoffs
		if c := cost.Amount(r.Cost); c.IsPositive() {
			s.Cost = cost.Format(Spent(s).Add(c))
		}
	}
}

// joinBranches makes the join: the branches' use counts as the run's, the join agent takes their
// outputs, in the order given, as its next input, and the handoff sequence records the join.
// The guards then check the join agent's step as any other.
func joinBranches(p *Plan, d *Update, runs map[string]BranchRun, join v1alpha1.Join, succeeded int, now time.Time) {
	s := &d.Status
	before := spent{tokens: s.TokensUsed, cost: Spent(s)}
	foldBranches(s, runs)
	agents := make([]string, len(s.Branches))
	var tokens int64
	for i, b := range s.Branches {
		agents[i] = b.Agent
		tokens += b.TokensUsed
	}
	input := joinInput(s.Branches, runs)
	appendRecord(s, v1alpha1.HandoffRecord{
		Step: s.StepCount, From: strings.Join(agents, listSeparator), To: join.Agent, Time: metav1.NewTime(now),
		Tokens: tokens, Outcome: v1alpha1.OutcomeJoined, InputDigest: digest(input),
		Reason: fmt.Sprintf(joinedReasonFormat, succeeded, len(s.Branches), join.Mode),
	})
	s.CurrentAgent, s.Input = join.Agent, statusText(input, maxInput)
	progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	warnTokens(p, d, before.tokens, now)
	warnCost(p, d, before.cost, now)
	if t, ok := check(p, s, now); ok {
		endOrWrapUp(p, d, t, now)
	}
}

// joinInput is the join agent's input: each branch's output, in the order given, under a
// heading with its agent and how it ended; a branch that did not succeed says why instead. Each
// branch gets an equal part of the input's bound.
func joinInput(branches []v1alpha1.BranchStatus, runs map[string]BranchRun) string {
	part := maxInput/max(len(branches), 1) - 256
	var b strings.Builder
	for i, br := range branches {
		r := runs[br.Name]
		how := string(r.Reason)
		if !r.Found || !r.Phase.Terminal() {
			how = "cancelled: not needed for the join"
		}
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, branchHeadingFormat, i+1, br.Agent, how)
		b.WriteString("\n\n")
		switch {
		case r.Phase == v1alpha1.PhaseSucceeded:
			b.WriteString(statusText(r.Output, part))
		case r.Found && r.Phase.Terminal():
			b.WriteString(statusText("No output: "+r.Message, part))
		default:
			b.WriteString("No output.")
		}
	}
	return b.String()
}

// running names the branches not yet ended.
func running(branches []v1alpha1.BranchStatus) []string {
	var out []string
	for _, b := range branches {
		if !b.Phase.Terminal() {
			out = append(out, b.Name)
		}
	}
	return out
}

// BranchesToCancel names the branches of a run that ended that may still run: the controller
// cancels them, so that no branch outlives its run.
func BranchesToCancel(st *v1alpha1.AgentRunStatus) []string {
	if !st.Phase.Terminal() {
		return nil
	}
	return running(st.Branches)
}

// waitsForPeople reports whether a run in this phase waits for a person's decision or reply.
func waitsForPeople(p v1alpha1.RunPhase) bool {
	return p == v1alpha1.PhaseAwaitingApproval || p == v1alpha1.PhaseAwaitingInput
}
