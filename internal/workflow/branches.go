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
	takenBranchMessageFormat  = "branch %s (agent %s) cannot run: %s"
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
	if short := shortOfShares(p, s, res, n); short != "" {
		return route{fail: fmt.Sprintf("agent %s asked for %d branches, and the run has %s left: less than one each", res.Agent, n, short)}
	}
	agents := make([]string, n)
	for i, b := range res.Parallel {
		if !p.CanHandOff(res.Agent, b.Agent) {
			return route{fail: fmt.Sprintf("agent %s asked for a branch to %s, which is not one of its handoffs", res.Agent, quoteName(b.Agent))}
		}
		if strings.TrimSpace(b.Input) == "" {
			return route{fail: fmt.Sprintf("branch %d (agent %s) has no input", i+1, quoteName(b.Agent))}
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

// shortOfShares names the limit whose remainder after the fan-out step would give a branch less
// than one step, handoff or token of its own, if one would (with budget Split). s is the status
// before the step.
func shortOfShares(p *Plan, s *v1alpha1.AgentRunStatus, res StepResult, n int32) string {
	if a := p.Agent(res.Agent); a.Parallel.Budget == v1alpha1.BudgetShared {
		n = 1
	}
	l := p.Limits
	switch {
	case l.MaxSteps-s.StepCount-s.BranchSteps-1 < n:
		return fmt.Sprintf("%d steps", max(l.MaxSteps-s.StepCount-s.BranchSteps-1, 0))
	case l.MaxHandoffs-s.HandoffCount-1 < n:
		return fmt.Sprintf("%d handoffs", max(l.MaxHandoffs-s.HandoffCount-1, 0))
	case l.MaxTokens-s.TokensUsed-res.Tokens < int64(n):
		return fmt.Sprintf("%d tokens", max(l.MaxTokens-s.TokensUsed-res.Tokens, 0))
	}
	return ""
}

// maxFanOut is the most branches the agent's next step may ask for: what its parallel allows,
// within what remains of limits.maxBranches, and none at limits.maxDepth.
func maxFanOut(p *Plan, st *v1alpha1.AgentRunStatus, agent string) int32 {
	a := p.Agent(agent)
	if a == nil || a.Parallel == nil || p.depth >= p.Limits.MaxDepth {
		return 0
	}
	return max(min(maxBranchesOf(a), p.Limits.MaxBranches-st.BranchesStarted), 0)
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
func ParentLabel(parent string) string { return LabelValue(parent) }

// LabelValue is an object's name as a label's value: the name, or, past a label value's 63
// characters, its beginning and a digest of the whole.
func LabelValue(name string) string { return fitName(name, "", maxLabelValue) }

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
			// In whole seconds: the status as stored keeps the fan-out's time to the second,
			// and a branch's share is checked against it.
			left := v1alpha1.Duration(max(deadline.Truncate(time.Second).Sub(at.Truncate(time.Second)), time.Second).String())
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

// AsBranch is the plan for a run that is a branch, nested depth deep (from 1), that starts at
// agent: its first answer without a handoff is the branch's output, and it may fan out only
// while depth is below limits.maxDepth. The plan is a copy, as ForRun's.
func (p *Plan) AsBranch(agent string, depth int32) *Plan {
	run := *p
	run.entry, run.depth = agent, depth
	return &run
}

// Entrypoint is the agent a run starts at: the config's, or a branch's own.
func (p *Plan) Entrypoint() string {
	if p.entry != "" {
		return p.entry
	}
	return p.Spec.Entrypoint
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

// BranchPlan is the plan of branch i (from 0) of the run's current fan-out, as the operator
// makes the branch's run: the config under the branch's share of the run's limits (Shares),
// with the run's approvals and creator, starting at the branch's agent one level deeper. st is
// the status that fanned out.
func (p *Plan) BranchPlan(st *v1alpha1.AgentRunStatus, i int) (*Plan, error) {
	shares := Shares(p, st)
	if i < 0 || i >= len(shares) {
		return nil, fmt.Errorf("the run has no branch %d", i+1)
	}
	q, errs := NewPlan(p.Spec, &shares[i])
	if len(errs) > 0 {
		return nil, fmt.Errorf("branch %d's share of the run's limits: %w", i+1, errs.ToAggregate())
	}
	policy := v1alpha1.ApprovalsRequired
	if p.skipGates {
		policy = v1alpha1.ApprovalsSkip
	}
	b := st.Branches[i]
	return q.ForRun(b.Name, p.runNamespace, policy, p.creator).AsBranch(b.Agent, p.depth+1), nil
}

// FanOutRecord is the handoff record step n wrote when its result fanned out at time at, as a
// run's history keeps it: no later step's record carries it (the next one carries the join,
// which shares its step), so a reader of the records rebuilds it from the step's own.
func FanOutRecord(n int32, res StepResult, at time.Time) v1alpha1.HandoffRecord {
	agents := make([]string, len(res.Parallel))
	for i, b := range res.Parallel {
		agents[i] = b.Agent
	}
	return v1alpha1.HandoffRecord{Step: n, From: res.Agent, To: strings.Join(agents, listSeparator), Outcome: v1alpha1.OutcomeFanOut,
		Reason: fmt.Sprintf(fanOutReasonFormat, len(res.Parallel)), Time: metav1.NewTime(at), Tokens: res.Tokens}
}
