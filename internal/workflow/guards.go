package workflow

import (
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Trip is a guard's verdict that a run must end before its next step. (The ends that are no
// guard's, such as a completion or a rejection, are Trips too, with no Guard.)
type Trip struct {
	Reason  v1alpha1.TerminationReason
	Message string
	Loop    *v1alpha1.LoopStatus
	// Guard names the guard that tripped: the limit's termination reason, or the loop
	// detector. Empty when the end is no guard's.
	Guard string
}

// guarded marks a trip as a guard's.
func guarded(t Trip) Trip {
	t.Guard = string(t.Reason)
	if t.Loop != nil {
		t.Guard = string(t.Loop.Detector)
	}
	return t
}

// guardInput is what every guard sees: the plan, the status and the step about to start, and
// the history the loop detectors read, worked out once.
type guardInput struct {
	plan   *Plan
	status *v1alpha1.AgentRunStatus
	next   string
	now    time.Time
	// hist is the steps the loop detectors look at; agents and steps are their agents and
	// step numbers followed by the step about to run.
	hist []v1alpha1.HandoffRecord
	// earlier are the steps of a session's earlier turns given the same history: the repeated
	// input and output detectors see them too.
	earlier []v1alpha1.HandoffRecord
	agents  []string
	steps   []int32
}

// A guard trips when the run must not take its next step. It returns the reason and a message
// that names the evidence; it never quotes model output.
type guard func(in guardInput) (Trip, bool)

// guards run in this order before every step; the first that trips ends the run.
var guards = []guard{
	timeoutGuard,
	errorGuard,
	stepGuard,
	handoffGuard,
	tokenGuard,
	costGuard,
	transcriptGuard,
	agentStepGuard,
	loopGuard,
}

// loopDetectors run in this order, last in the chain.
var loopDetectors = []guard{
	windowGuard,
	cycleGuard,
	repeatedInputGuard,
	repeatedOutputGuard,
}

// check runs the guard chain for the run's next step.
func check(p *Plan, st *v1alpha1.AgentRunStatus, now time.Time) (Trip, bool) {
	if st.WrappingUp != nil {
		return Trip{}, false // the last turn, after a limit ran out
	}
	in := guardInput{plan: p, status: st, next: st.CurrentAgent, now: now, hist: history(st), earlier: p.earlier}
	for _, r := range in.hist {
		in.agents, in.steps = append(in.agents, r.From), append(in.steps, r.Step)
	}
	in.agents, in.steps = append(in.agents, in.next), append(in.steps, st.StepCount+1)
	return firstTrip(guards, in)
}

// firstTrip runs guards in order and returns the first trip.
func firstTrip(chain []guard, in guardInput) (Trip, bool) {
	for _, g := range chain {
		if t, ok := g(in); ok {
			return guarded(t), true
		}
	}
	return Trip{}, false
}

func timeoutGuard(in guardInput) (Trip, bool) {
	deadline, ok := deadline(in.plan, in.status)
	if !ok || in.now.Before(deadline) {
		return Trip{}, false
	}
	elapsed := in.now.Sub(deadline.Add(-in.plan.Limits.Timeout)).Round(time.Second)
	return Trip{Reason: v1alpha1.ReasonTimeout, Message: fmt.Sprintf(
		"run timeout: %s elapsed of %s; %s had control after step %d",
		elapsed, in.plan.Limits.Timeout, in.next, in.status.StepCount)}, true
}

func errorGuard(in guardInput) (Trip, bool) {
	if in.status.ErrorCount < in.plan.Limits.MaxErrors {
		return Trip{}, false
	}
	msg := fmt.Sprintf("error limit: %d of %d steps failed", in.status.ErrorCount, in.plan.Limits.MaxErrors)
	if last := lastFailure(in.status); last != nil {
		msg += fmt.Sprintf("; last failure at step %d, agent %s: %s", last.Step, last.From, last.Reason)
	}
	return Trip{Reason: v1alpha1.ReasonTooManyErrors, Message: msg}, true
}

func stepGuard(in guardInput) (Trip, bool) {
	// The steps of the run's joined branches count with its own.
	taken := in.status.StepCount + in.status.BranchSteps
	if taken < in.plan.Limits.MaxSteps {
		return Trip{}, false
	}
	return Trip{Reason: v1alpha1.ReasonMaxStepsExceeded, Message: fmt.Sprintf(
		"step limit: %d of %d steps taken; %s was not started", taken, in.plan.Limits.MaxSteps, in.next)}, true
}

func handoffGuard(in guardInput) (Trip, bool) {
	if in.status.HandoffCount < in.plan.Limits.MaxHandoffs {
		return Trip{}, false
	}
	return Trip{Reason: v1alpha1.ReasonMaxHandoffsExceeded, Message: fmt.Sprintf(
		"handoff limit: handoff %d of %d reached; %s was not started; last handoffs: %s",
		in.status.HandoffCount, in.plan.Limits.MaxHandoffs, in.next, recentPath(in.status, 6))}, true
}

func tokenGuard(in guardInput) (Trip, bool) {
	if in.status.TokensUsed < in.plan.Limits.MaxTokens {
		return Trip{}, false
	}
	return Trip{Reason: v1alpha1.ReasonTokenBudgetExceeded, Message: fmt.Sprintf(
		"token budget: tokens %d of %d used; %s was not started", in.status.TokensUsed, in.plan.Limits.MaxTokens, in.next)}, true
}

func transcriptGuard(in guardInput) (Trip, bool) {
	if in.status.TranscriptBytes < in.plan.Limits.MaxTranscriptBytes {
		return Trip{}, false
	}
	return Trip{Reason: v1alpha1.ReasonTranscriptBudgetExceeded, Message: fmt.Sprintf(
		"transcript budget: the run's transcript holds %d of its %d bytes (limits.maxTranscriptBytes); %s was not started",
		in.status.TranscriptBytes, in.plan.Limits.MaxTranscriptBytes, in.next)}, true
}

func agentStepGuard(in guardInput) (Trip, bool) {
	a := in.plan.Agent(in.next)
	if a == nil || a.MaxSteps == nil {
		return Trip{}, false
	}
	taken := in.status.AgentSteps[in.next]
	if taken < *a.MaxSteps {
		return Trip{}, false
	}
	return Trip{Reason: v1alpha1.ReasonAgentStepLimitExceeded, Message: fmt.Sprintf(
		"agent step limit: %s took %d of its %d steps and was not started again", in.next, taken, *a.MaxSteps)}, true
}

// deadline is when the run times out.
// Time spent waiting for people or held at a quota's cap does not count: a waiting run has no
// deadline, and the time it waited moves the deadline back.
func deadline(p *Plan, st *v1alpha1.AgentRunStatus) (time.Time, bool) {
	if st.StartTime == nil || st.Phase == v1alpha1.PhaseAwaitingApproval || st.PendingInput != nil || st.QuotaHold != nil {
		return time.Time{}, false
	}
	return st.StartTime.Add(p.Limits.Timeout + st.Waited.OrZero()), true
}

// lastFailure is the latest failed step still in the sequence.
func lastFailure(st *v1alpha1.AgentRunStatus) *v1alpha1.HandoffRecord {
	for i := len(st.HandoffSequence) - 1; i >= 0; i-- {
		if st.HandoffSequence[i].Outcome == v1alpha1.OutcomeFailed {
			return &st.HandoffSequence[i]
		}
	}
	return nil
}

// recentPath renders the latest n steps as "a -> b -> c".
func recentPath(st *v1alpha1.AgentRunStatus, n int) string {
	seq := st.HandoffSequence
	if len(seq) > n {
		seq = seq[len(seq)-n:]
	}
	if len(seq) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(seq)+1)
	for _, r := range seq {
		parts = append(parts, r.From)
	}
	if last := seq[len(seq)-1]; last.To != "" {
		parts = append(parts, last.To)
	}
	return strings.Join(parts, " -> ")
}
