package workflow

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// maxTruncatedRetries is how many more times an agent is asked after a truncated answer.
const maxTruncatedRetries = 2

// WaitForConfig keeps a run Pending while its AgentConfig does not exist.
func WaitForConfig(st v1alpha1.AgentRunStatus, config string, now time.Time) Update {
	return waitPending(st, v1alpha1.ReasonConfigNotFound, EventWaitingForConfig,
		fmt.Sprintf("AgentConfig %s does not exist in the run's namespace; the run starts when it is created", config), now)
}

// WaitForSecret keeps a run Pending while a Secret its agents need cannot be read.
func WaitForSecret(st v1alpha1.AgentRunStatus, problem string, now time.Time) Update {
	return waitPending(st, v1alpha1.ReasonSecretNotFound, EventWaitingForSecret, problem+"; the run starts when it can be read", now)
}

func waitPending(st v1alpha1.AgentRunStatus, reason, event, msg string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	s.Phase = v1alpha1.PhasePending
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionConfigResolved); c == nil || c.Reason != reason || c.Message != statusText(msg, maxMessage) {
		d.event(EventNormal, event, "%s", msg)
	}
	setCondition(s, now, v1alpha1.ConditionConfigResolved, metav1.ConditionFalse, reason, msg)
	progress(s, now, v1alpha1.PhasePending, "waiting: "+reason)
	return d
}

// Start begins a run on its pinned config: the first agent gets control with the run's input.
func Start(p *Plan, st v1alpha1.AgentRunStatus, input, revision string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	agent, state := modes[p.Mode()].start(p)
	start := metav1.NewMicroTime(now)
	s.Phase = v1alpha1.PhaseRunning
	s.StartTime = &start
	s.ConfigRevision = revision
	s.CurrentAgent = agent
	s.State = state
	s.Input = statusText(input, maxInput)
	setCondition(s, now, v1alpha1.ConditionConfigResolved, metav1.ConditionTrue, v1alpha1.ReasonConfigPinned,
		fmt.Sprintf("pinned as %s", revision))
	progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	// No Event: status says the run started, and an Event is one more write per run.
	if agent == "" {
		end(&d, Trip{Reason: v1alpha1.ReasonCompleted, Message: fmt.Sprintf("the first state %s is final", state)}, now)
		return d
	}
	if t, ok := check(p, s, now); ok {
		end(&d, t, now)
	}
	return d
}

// Next is the step a running run takes next.
func Next(p *Plan, st *v1alpha1.AgentRunStatus) Step {
	step := Step{
		Number:  st.StepCount + 1,
		Agent:   st.CurrentAgent,
		Input:   st.Input,
		Turn:    st.AgentSteps[st.CurrentAgent],
		Timeout: p.StepTimeout(st.CurrentAgent),
		Left: Left{
			Steps:    p.Limits.MaxSteps - st.StepCount,
			Handoffs: p.Limits.MaxHandoffs - st.HandoffCount,
			Tokens:   p.Limits.MaxTokens - st.TokensUsed,
		},
	}
	if n := len(st.HandoffSequence); n > 0 && st.HandoffSequence[n-1].To == st.CurrentAgent {
		last := st.HandoffSequence[n-1]
		step.Reason = last.Reason
		switch last.Outcome {
		case v1alpha1.OutcomeTruncated:
			step.Attempt = trailing(st, st.CurrentAgent, v1alpha1.OutcomeTruncated)
			step.Continues = true
		case v1alpha1.OutcomeInvalid:
			step.Attempt = trailing(st, st.CurrentAgent, v1alpha1.OutcomeInvalid)
			step.Repairs = true
		}
	}
	return step
}

// Check runs the guards before the run's next step. When one trips, the update ends the run.
func Check(p *Plan, st v1alpha1.AgentRunStatus, now time.Time) (Update, bool) {
	if st.Phase != v1alpha1.PhaseRunning {
		return Update{}, false
	}
	t, ok := check(p, &st, now)
	if !ok {
		return Update{}, false
	}
	d := Update{Status: *st.DeepCopy()}
	end(&d, t, now)
	return d, true
}

// Deadline is when the run must be looked at again without anything else happening: its
// timeout while it runs, its gate's timeout while it waits for approval. ok is false when
// there is no such time.
func Deadline(p *Plan, st *v1alpha1.AgentRunStatus) (time.Time, bool) {
	if st.Phase == v1alpha1.PhaseAwaitingApproval {
		return WaitDeadline(p, st)
	}
	return deadline(p, st)
}

// Cancel ends a run Cancelled at a person's request.
func Cancel(st v1alpha1.AgentRunStatus, why string, now time.Time) Update {
	msg := "cancelled by annotation " + v1alpha1.AnnotationCancel
	if why != "" {
		msg += ": " + statusText(why, 256)
	}
	return Fail(st, v1alpha1.ReasonCancelled, msg, now)
}

// Fail ends a run for a reason found outside the steps, such as an invalid config.
func Fail(st v1alpha1.AgentRunStatus, reason v1alpha1.TerminationReason, message string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	if reason == v1alpha1.ReasonConfigInvalid {
		setCondition(&d.Status, now, v1alpha1.ConditionConfigResolved, metav1.ConditionFalse, string(reason), message)
	}
	end(&d, Trip{Reason: reason, Message: message}, now)
	return d
}

// Apply records one step's result and decides what comes next: another agent, the same agent
// again, or the end of the run. The guards for the next step run here too, so a run that
// reached a limit ends in the same status write as the step that reached it.
func Apply(p *Plan, st v1alpha1.AgentRunStatus, res StepResult, now time.Time) Update {
	if st.Phase != v1alpha1.PhaseRunning {
		return Update{Status: *st.DeepCopy()}
	}
	if res.Held != nil {
		return hold(p, st, res, now)
	}
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	before := s.TokensUsed
	s.StepCount++
	s.TokensUsed += res.Tokens - res.CountedTokens
	s.ToolCalls += res.ToolCalls - res.CountedToolCalls
	s.TranscriptBytes += max(res.RecordBytes, 0)
	if s.AgentSteps == nil {
		s.AgentSteps = map[string]int32{}
	}
	s.AgentSteps[res.Agent]++

	inputDigest, outputDigest := recordDigests(res)
	rec := v1alpha1.HandoffRecord{
		Step:        s.StepCount,
		From:        res.Agent,
		Time:        metav1.NewTime(now),
		Tokens:      res.Tokens,
		InputDigest: inputDigest,
		ToolCalls:   res.ToolCalls,
	}
	var r route
	switch {
	case res.Trip != nil:
		r = route{end: res.Trip.Reason, outcome: v1alpha1.OutcomeFailed, reason: res.Trip.Message, message: res.Trip.Message}
	case res.Error != "":
		r = route{fail: res.Error}
	case p.Agent(res.Agent) == nil:
		r = route{fail: fmt.Sprintf("agent %s is not in the pinned config", quoteName(res.Agent))}
	case res.FinishReason == v1alpha1.FinishLength:
		rec.OutputDigest = outputDigest
		r = truncated(s, res)
	default:
		rec.OutputDigest = outputDigest
		// A supervisor's routing step carries a decision, not its answer: the schema is for answers.
		normalized, problems, ok := res.Output, "", true
		if res.Routing == nil {
			normalized, problems, ok = p.validateOutput(res.Agent, res.Output)
		}
		if !ok {
			addContext(&d, res.Agent, ContextOutput, res.Output)
			addContext(&d, res.Agent, ContextInvalid, problems)
			r = invalid(s, res, problems)
			break
		}
		res.Output = normalized
		res.Signal = detectSignal(p, res)
		r = modes[p.Mode()].route(p, s, res)
	}
	if r.fail != "" {
		r = failStep(p, s, res, r)
	}
	if r.failed {
		s.ErrorCount++
	}
	r.counts.apply(s)
	rec.To = r.to
	rec.Outcome = r.outcome
	rec.Reason = statusText(r.reason, maxReason)
	rec.Signal = r.signal
	rec.Confidence = r.confidence
	appendRecord(s, rec)
	d.Events = append(d.Events, r.events...)
	switch rec.Outcome {
	case v1alpha1.OutcomeFailed:
		addContext(&d, res.Agent, ContextFailed, r.reason)
	case v1alpha1.OutcomeTruncated:
		addContext(&d, res.Agent, ContextTruncated, res.Output)
	case v1alpha1.OutcomeInvalid:
	default:
		addContext(&d, res.Agent, ContextOutput, res.Output)
	}
	if len(res.Ignored) > 0 {
		names := make([]string, len(res.Ignored))
		for i, n := range res.Ignored {
			names[i] = toolToken(n)
		}
		d.event(EventNormal, EventToolCallsIgnored, "step %d of agent %s called several tools; the first was used, these were ignored: %s",
			s.StepCount, res.Agent, strings.Join(names, ", "))
	}

	if r.end != "" {
		if r.final {
			s.Output = statusText(res.Output, maxOutput)
		}
		t := Trip{Reason: r.end, Message: fmt.Sprintf("%s at step %d", r.message, s.StepCount)}
		if res.Trip != nil {
			t = guarded(Trip{Reason: res.Trip.Reason, Message: res.Trip.Message, Loop: res.Trip.Loop})
		}
		done := &v1alpha1.Completion{Reason: t.Reason, Message: t.Message, State: r.state}
		if g, ok := p.gateAt(stop{kind: stopAfterStep, agent: res.Agent, outcome: rec.Outcome, ends: done}); ok {
			openGate(p, &d, g, done, now)
			return d
		}
		if r.state != "" {
			s.State = r.state // the final state a StateMachine reached
		}
		end(&d, t, now)
		return d
	}
	warnTokens(p, &d, before, now)
	if r.await {
		awaitInput(p, &d, res.Agent, res.Output, now)
		return d
	}
	if r.handoff {
		s.HandoffCount++
	}
	s.CurrentAgent = r.to
	s.State = r.state
	s.Input = statusText(r.input, maxInput)
	progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	if t, ok := check(p, s, now); ok {
		end(&d, t, now)
		return d
	}
	// A limit already reached wins over the gate after the agent.
	if g, ok := p.gateAt(stop{kind: stopAfterStep, agent: res.Agent, outcome: rec.Outcome}); ok {
		openGate(p, &d, g, nil, now)
	}
	return d
}

// warnTokens warns once, with an Event and a condition, when a step carries the tokens used
// across limits.tokenWarningPercent of the budget.
func warnTokens(p *Plan, d *Update, before int64, now time.Time) {
	s := &d.Status
	threshold := p.Limits.MaxTokens * int64(p.Limits.TokenWarningPercent) / 100
	if s.TokensUsed < threshold || before >= threshold {
		return
	}
	msg := fmt.Sprintf("token budget: tokens %d of %d used (%d%%), past the warning at %d%%",
		s.TokensUsed, p.Limits.MaxTokens, s.TokensUsed*100/p.Limits.MaxTokens, p.Limits.TokenWarningPercent)
	setCondition(s, now, v1alpha1.ConditionTokenBudgetWarning, metav1.ConditionTrue, v1alpha1.ReasonThresholdReached, msg)
	d.event(EventWarning, EventTokenBudgetWarning, "%s", msg)
}

// truncated asks the same agent again after an answer cut at the token limit, at most
// maxTruncatedRetries more times; after that the step fails.
func truncated(s *v1alpha1.AgentRunStatus, res StepResult) route {
	if trailing(s, res.Agent, v1alpha1.OutcomeTruncated) >= maxTruncatedRetries {
		return route{fail: fmt.Sprintf("answer still truncated at the output-token limit after %d attempts", maxTruncatedRetries+1)}
	}
	return askAgain(s, res, v1alpha1.OutcomeTruncated, "answer truncated at the output-token limit; asking again")
}

// askAgain gives the same agent the same input once more, in the same state.
func askAgain(s *v1alpha1.AgentRunStatus, res StepResult, outcome v1alpha1.StepOutcome, reason string) route {
	return route{to: res.Agent, state: s.State, outcome: outcome, reason: reason, input: res.Input}
}

// trailing counts the agent's steps with this outcome at the end of the sequence.
func trailing(s *v1alpha1.AgentRunStatus, agent string, outcome v1alpha1.StepOutcome) int {
	n := 0
	for i := len(s.HandoffSequence) - 1; i >= 0; i-- {
		r := s.HandoffSequence[i]
		if r.From != agent || r.Outcome != outcome {
			break
		}
		n++
	}
	return n
}

// invalid asks the same agent to repair an answer that does not match its outputSchema, at
// most maxRepairs times; after that the run ends InvalidOutput with the errors.
func invalid(s *v1alpha1.AgentRunStatus, res StepResult, problems string) route {
	if trailing(s, res.Agent, v1alpha1.OutcomeInvalid) >= maxRepairs {
		return route{
			end:     v1alpha1.ReasonInvalidOutput,
			outcome: v1alpha1.OutcomeInvalid,
			reason:  "output does not match its outputSchema: " + problems,
			message: fmt.Sprintf("%s's output still does not match its outputSchema after %d repairs: %s", res.Agent, maxRepairs, problems),
		}
	}
	return askAgain(s, res, v1alpha1.OutcomeInvalid, "output does not match its outputSchema; asking for a repair: "+problems)
}

// failStep counts a failed step and hands control to the agent that recovers, or ends the run
// when no one can.
func failStep(p *Plan, s *v1alpha1.AgentRunStatus, res StepResult, r route) route {
	why := statusText(r.fail, maxReason)
	rc := modes[p.Mode()].recover(p, s, res.Agent)
	out := route{failed: true, counts: rc.counts, outcome: v1alpha1.OutcomeFailed, reason: why, signal: r.signal, events: r.events}
	switch {
	case rc.end != "":
		out.end, out.message = rc.end, rc.message
		return out
	case !rc.ok:
		out.end = v1alpha1.ReasonTooManyErrors
		if res.TimedOut {
			out.end = v1alpha1.ReasonAgentTimeout
		}
		out.message = fmt.Sprintf("%s failed with no agent to recover (%s)", res.Agent, why)
		return out
	}
	// Recovery moves control but is not a handoff: failures count against maxErrors only.
	out.to, out.state = rc.to, rc.state
	out.input = fmt.Sprintf("step %d of agent %s failed: %s", s.StepCount, res.Agent, why)
	if len(r.events) == 0 {
		out.events = append(out.events, Event{Type: EventWarning, Reason: EventStepFailed,
			Message: fmt.Sprintf("step %d of agent %s failed: %s; %s takes over", s.StepCount, res.Agent, why, rc.to)})
	}
	return out
}

// end puts the run in its terminal phase. The reason and message are set exactly once.
func end(d *Update, t Trip, now time.Time) {
	s := &d.Status
	if s.Phase.Terminal() {
		return
	}
	done := metav1.NewTime(now)
	s.Phase = t.Reason.Phase()
	s.TerminationReason = t.Reason
	s.TerminationMessage = statusText(t.Message, maxMessage)
	s.Loop = t.Loop
	s.CompletionTime = &done
	d.Guard = t.Guard
	// A run that ended waits for no one; the time it waited counts as waited.
	if w := s.PendingApproval; w != nil {
		s.Waited, s.PendingApproval = addWait(s.Waited, now.Sub(w.Since.Time)), nil
	}
	if w := s.PendingInput; w != nil {
		s.Waited, s.PendingInput = addWait(s.Waited, now.Sub(w.Since.Time)), nil
	}
	settle(s, now)
	typ := EventWarning
	if s.Phase != v1alpha1.PhaseFailed {
		typ = EventNormal
	}
	// A run that succeeds gets no Event: its status and conditions say so, and an Event is one
	// more API write per run. An end a person should notice gets one.
	if s.Phase != v1alpha1.PhaseSucceeded {
		d.event(typ, string(t.Reason), "%s", s.TerminationMessage)
	}
}

// runningMessage is the Progressing condition's message while agents take steps. It names no
// agent or step, so the condition stays the same from step to step and a step's status write
// does not carry the conditions (status.currentAgent and stepCount say where the run is).
const runningMessage = "agents are taking steps; status.currentAgent has control"

// setCondition sets a condition; its transition time is the update's time, not the clock's.
func setCondition(s *v1alpha1.AgentRunStatus, now time.Time, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            statusText(message, maxMessage),
		LastTransitionTime: metav1.NewTime(now),
	})
}
