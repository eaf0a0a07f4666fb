package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
)

// Parallel branches (docs/design/parallel-branches.md). An agent with parallel set may end its
// step with several branches at once. The fan-out is one step of the run: one handoff record,
// whose outcome is FanOut and whose to lists the branches' agents, and status.branches names the
// child runs the controller then creates, each with its share of what remains of the run's
// limits. The run waits Running, taking no step, until the branches join (Join): then the join
// agent takes their outputs as its next input, and the branches' use counts as the run's.

// Branch is one branch an agent's step asks for: the agent that takes it, and its input.
type Branch struct {
	Agent string `json:"agent"`
	Input string `json:"input,omitempty"`
}

// Default branch limits, the same as the API's defaults.
const (
	DefaultMaxBranches          int32 = 16
	DefaultMaxDepth             int32 = 2
	DefaultMaxBranchesPerFanOut int32 = 4
)

// ReasonBranching is the Progressing reason of a run that waits for its branches to join.
const ReasonBranching = "Branching"

const (
	branchingMessage          = "waiting for its branches to join"
	maxBranchInput            = maxInput
	fanOutReasonFormat        = "fan-out to %d branches"
	joinedReasonFormat        = "joined %d of %d branches (%s)"
	branchHeadingFormat       = "## Branch %d: %s (%s)"
	failedBranchMessageFormat = "branch %s (agent %s) ended %s: %s"
	joinTimeoutMessageFormat  = "the join timed out after %s: %d of %d branches ended"
	branchNameSeparator       = "-b"
	listSeparator             = ","
	maxRunName                = 253
	maxLabelValue             = 63
	nameHashLen               = 8
	// shareRoundingPlaces is the decimal places a branch's share of maxCost keeps, rounded
	// down so that the shares never add up past what remains.
	shareRoundingPlaces int32 = 6
)

// Branching reports whether the run waits for its branches to join: its latest step fanned out,
// and it is Running. Nothing else happens to a run while it branches; no step starts.
func Branching(st *v1alpha1.AgentRunStatus) bool {
	n := len(st.HandoffSequence)
	return st.Phase == v1alpha1.PhaseRunning && n > 0 && st.HandoffSequence[n-1].Outcome == v1alpha1.OutcomeFanOut
}

// fanOut checks the branches a step asks for: the agent may fan out (parallel), to that many,
// each to one of its handoffs, at a depth and with a total the limits allow. It routes the
// branches, or fails the step saying why. s is the status before the step.
func fanOut(p *Plan, s *v1alpha1.AgentRunStatus, res StepResult) route {
	a := p.Agent(res.Agent)
	n := int32(len(res.Parallel))
	switch {
	case a.Parallel == nil:
		return route{fail: fmt.Sprintf("agent %s asked for %d branches and may not fan out (it has no parallel)", res.Agent, n)}
	case n > maxBranchesOf(a):
		return route{fail: fmt.Sprintf("agent %s asked for %d branches, past its parallel.maxBranches %d", res.Agent, n, maxBranchesOf(a))}
	case p.depth >= p.Limits.MaxDepth:
		return route{fail: fmt.Sprintf("agent %s asked for branches at depth %d, and limits.maxDepth is %d", res.Agent, p.depth, p.Limits.MaxDepth)}
	case s.BranchesStarted+n > p.Limits.MaxBranches:
		return route{fail: fmt.Sprintf("agent %s asked for %d branches, and the run has started %d of limits.maxBranches %d",
			res.Agent, n, s.BranchesStarted, p.Limits.MaxBranches)}
	}
	agents := make([]string, n)
	for i, b := range res.Parallel {
		if !p.CanHandOff(res.Agent, b.Agent) {
			return route{fail: fmt.Sprintf("agent %s asked for a branch to %s, which is not one of its handoffs", res.Agent, quoteName(b.Agent))}
		}
		if !fitsStatus(b.Input, maxBranchInput) {
			return route{fail: fmt.Sprintf("branch %d's input is past %d bytes", i+1, maxBranchInput)}
		}
		agents[i] = b.Agent
	}
	return route{
		to:       strings.Join(agents, listSeparator),
		outcome:  v1alpha1.OutcomeFanOut,
		reason:   fmt.Sprintf(fanOutReasonFormat, n),
		handoff:  true,
		branches: res.Parallel,
	}
}

// maxBranchesOf is the agent's parallel.maxBranches after its default.
func maxBranchesOf(a *v1alpha1.Agent) int32 {
	if a.Parallel == nil {
		return 0
	}
	return orDefault(a.Parallel.MaxBranches, DefaultMaxBranchesPerFanOut)
}

// branchOut puts a run whose step fanned out into branching: status.branches names each
// branch's run, and the run waits, Running, for them to join. Its current agent is the list of
// the branches' agents, as the fan-out's record has it, and the guards see the fan-out as one
// step to that list.
func branchOut(p *Plan, d *Update, v verdict, now time.Time) {
	s := &d.Status
	s.CurrentAgent, s.Input, s.State = v.to, "", v.state
	s.Branches = make([]v1alpha1.BranchStatus, len(v.branches))
	for i, b := range v.branches {
		s.Branches[i] = v1alpha1.BranchStatus{
			Name:        BranchName(p.runName, s.StepCount, i+1),
			Agent:       b.Agent,
			InputDigest: InputDigest(b.Input),
			Phase:       v1alpha1.PhasePending,
		}
	}
	s.BranchesStarted += int32(len(v.branches))
	progress(s, now, v1alpha1.PhaseRunning, branchingMessage)
	setCondition(s, now, v1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonBranching,
		fmt.Sprintf("step %d fanned out to %d branches: %s", s.StepCount, len(v.branches), v.to))
}

// InputDigest is the digest a branch's status keeps of its input, which the branch run's
// spec.input must have: all of SHA-256, as the run's trust in its input rests on it.
func InputDigest(input string) string {
	sum := sha256.Sum256([]byte(input))
	return hex.EncodeToString(sum[:])
}

// BranchName is the name of the run of a fan-out's branch: the parent's name, "-b", the step
// that fanned out, "-" and the branch's place, from 1. A parent whose name leaves no room is cut,
// and a digest of its whole name keeps the branch's name its own.
func BranchName(parent string, step int32, index int) string {
	suffix := fmt.Sprintf("%s%d-%d", branchNameSeparator, step, index)
	return fitName(parent, suffix, maxRunName)
}

// ParentLabel is the value of a branch's agents.baton.dev/parent label: the parent's name, or,
// past a label value's 63 characters, its beginning and a digest of the whole.
func ParentLabel(parent string) string { return fitName(parent, "", maxLabelValue) }

// fitName is name and suffix within limit characters, name cut and followed by a digest of it
// when they do not fit.
func fitName(name, suffix string, limit int) string {
	if len(name)+len(suffix) <= limit {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	tag := "-" + hex.EncodeToString(sum[:])[:nameHashLen]
	room := limit - len(suffix) - len(tag)
	return strings.TrimRight(name[:room], ".-") + tag + suffix
}

// Shares are the limits of the branches of the run's current fan-out, in order: what remains of
// the run's steps, handoffs, tokens, tool calls and cost, divided between them (budget Split,
// rounding down), or all of it to each (Shared; cost is divided either way, so that money is
// never spent twice). Each branch's timeout ends at the run's deadline, counted from the
// fan-out; approvals and the rest are the run's own. st is the status that fanned out.
func Shares(p *Plan, st *v1alpha1.AgentRunStatus) []v1alpha1.LimitOverrides {
	n := int64(len(st.Branches))
	if n == 0 {
		return nil
	}
	split := int64(1)
	if fanning := p.Agent(fanningAgent(st)); fanning == nil || fanning.Parallel == nil || fanning.Parallel.Budget != v1alpha1.BudgetShared {
		split = n
	}
	l := p.Limits
	steps := int32(max(int64(l.MaxSteps-st.StepCount-st.BranchSteps), 0) / split)
	handoffs := int32(max(int64(l.MaxHandoffs-st.HandoffCount), 0) / split)
	tokens := max(l.MaxTokens-st.TokensUsed, 0) / split
	toolCalls := int32(max(int64(l.MaxToolCalls-st.ToolCalls), 0) / split)
	share := v1alpha1.LimitOverrides{
		MaxSteps: &steps, MaxHandoffs: &handoffs, MaxTokens: &tokens, MaxToolCalls: &toolCalls,
		MaxErrors: ptrTo(l.MaxErrors), MaxBranches: ptrTo(max(l.MaxBranches-st.BranchesStarted, 0) / int32(split)),
		MaxDepth: ptrTo(l.MaxDepth),
	}
	if limit, ok := l.MaxCost(); ok {
		left := decimal.Max(limit.Sub(Spent(st)), decimal.Zero)
		each := cost.Format(left.Div(decimal.NewFromInt(n)).RoundDown(shareRoundingPlaces))
		share.MaxCost = &each
	}
	if deadline, ok := deadline(p, st); ok {
		if at, ok := fanOutTime(st); ok {
			left := v1alpha1.Duration(max(deadline.Sub(at), time.Second).String())
			share.Timeout = &left
		}
	}
	out := make([]v1alpha1.LimitOverrides, n)
	for i := range out {
		out[i] = *share.DeepCopy()
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// fanningAgent is the agent whose step fanned out: the From of the run's latest FanOut record.
func fanningAgent(st *v1alpha1.AgentRunStatus) string {
	if r, ok := fanOutRecord(st); ok {
		return r.From
	}
	return ""
}

// fanOutRecord is the record of the run's latest fan-out.
func fanOutRecord(st *v1alpha1.AgentRunStatus) (v1alpha1.HandoffRecord, bool) {
	for i := len(st.HandoffSequence) - 1; i >= 0; i-- {
		if r := st.HandoffSequence[i]; r.Outcome == v1alpha1.OutcomeFanOut {
			return r, true
		}
	}
	return v1alpha1.HandoffRecord{}, false
}

// fanOutTime is when the run's latest fan-out was made.
func fanOutTime(st *v1alpha1.AgentRunStatus) (time.Time, bool) {
	r, ok := fanOutRecord(st)
	return r.Time.Time, ok
}

// BranchRun is what the join reads of one branch's run, as the controller found it.
type BranchRun struct {
	// Found is set when the run exists; a branch whose run is not made yet waits.
	Found   bool
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
}

// Join decides what a branching run does, given its branches' runs by name: status.branches
// says their phases as seen; once the join holds (join.mode, or, with onFailure Continue, every
// branch ended), the join agent takes the branches' outputs as its next input and their use
// counts as the run's; a failed branch with onFailure Fail ends the run BranchFailed; past
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
	for i := range s.Branches {
		b := &s.Branches[i]
		r, ok := runs[b.Name]
		if !ok || !r.Found {
			continue
		}
		b.Phase = r.Phase
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
	case join.OnFailure != v1alpha1.JoinContinue && len(failed) > 0:
		b := s.Branches[failed[0]]
		r := runs[b.Name]
		foldBranches(s, runs)
		end(&d, Trip{Reason: v1alpha1.ReasonBranchFailed,
			Message: fmt.Sprintf(failedBranchMessageFormat, b.Name, b.Agent, r.Reason, r.Message)}, now)
	case succeeded >= needed || (join.OnFailure == v1alpha1.JoinContinue && (ended == n || timedOut)):
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

// AtDepth is the plan for a run that is a branch nested depth deep (0: no branch), which may fan
// out only while depth is below limits.maxDepth. The plan is a copy, as ForRun's.
func (p *Plan) AtDepth(depth int32) *Plan {
	run := *p
	run.depth = depth
	return &run
}

// checkParallel checks the agents that may fan out: in Swarm mode, with handoffs to fan out to,
// a join agent of the config, and a quorum no larger than the branches.
func (p *Plan) checkParallel(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range p.Spec.Agents {
		a := &p.Spec.Agents[i]
		if a.Parallel == nil {
			continue
		}
		at := path.Child("agents").Index(i).Child("parallel")
		if p.Mode() != v1alpha1.ModeSwarm {
			errs = append(errs, field.Forbidden(at, fmt.Sprintf("parallel branches are for Swarm mode; this config is %s", p.Mode())))
		}
		if len(a.Handoffs) == 0 {
			errs = append(errs, field.Required(path.Child("agents").Index(i).Child("handoffs"), "an agent with parallel fans out to its handoffs: it needs some"))
		}
		j := a.Parallel.Join
		if j.Agent != "" && p.Agent(j.Agent) == nil {
			errs = append(errs, field.Invalid(at.Child("join", "agent"), j.Agent, "not the name of an agent in spec.agents"))
		}
		if j.Mode == v1alpha1.JoinQuorum && (j.Quorum < 1 || j.Quorum > maxBranchesOf(a)) {
			errs = append(errs, field.Invalid(at.Child("join", "quorum"), j.Quorum, fmt.Sprintf("must be from 1 to maxBranches (%d)", maxBranchesOf(a))))
		}
		if _, err := j.Timeout.Get(); err != nil {
			errs = append(errs, field.Invalid(at.Child("join", "timeout"), string(*j.Timeout), err.Error()))
		}
	}
	return errs
}
