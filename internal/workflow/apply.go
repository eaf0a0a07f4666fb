package workflow

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A step's result goes through three phases. classify says what the step amounted to and where
// it sends the run: a decision, made from the status before the step, which it does not write.
// record writes the step into the status: its counts, its handoff record, its Events and what
// later agents see of it. settle moves the run on: to its end, unless a gate holds the
// completion; to a person's reply; or to the next agent, whose step the guards check first, and
// past which a gate may hold the run.

// maxTruncatedRetries is how many more times an agent is asked after a truncated answer.
const maxTruncatedRetries = 2

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
	if res.QuotaHold != nil {
		return HoldAtQuota(st, res.QuotaHold, now)
	}
	d := Update{Status: *st.DeepCopy()}
	taint(&d.Status, stepTaint(p, res, st.StepCount+1))
	v := classify(p, &st, res)
	record(&d, v, now)
	settle(p, &d, v, spent{tokens: st.TokensUsed, cost: Spent(&st)}, now)
	return d
}

// Context is what a step's result adds to what later agents see, as Apply records it, decided
// from the status before the step: what a step's transcript record keeps, written before the
// step is applied. It decides nothing else.
func Context(p *Plan, st *v1alpha1.AgentRunStatus, res StepResult) []ContextEntry {
	if st.Phase != v1alpha1.PhaseRunning || res.Held != nil || res.QuotaHold != nil {
		return nil
	}
	d := Update{}
	d.Status.StepCount = st.StepCount + 1
	addStepContext(&d, classify(p, st, res))
	return d.Context
}

// resultKind is what a step amounted to.
type resultKind int

const (
	// resultTripped: a guard stopped the run before a tool call.
	resultTripped resultKind = iota
	// resultFailed: the agent's call failed, or the agent is not in the pinned config.
	resultFailed
	// resultTruncated: the answer was cut at the output-token limit.
	resultTruncated
	// resultInvalid: the answer does not match the agent's outputSchema.
	resultInvalid
	// resultAnswered: an answer, which the mode routes.
	resultAnswered
)

// verdict is what a step amounted to and where it sends the run.
type verdict struct {
	kind resultKind
	// res is the result as the agent gave it.
	res StepResult
	// output is the answer as the run keeps it: normalized to the agent's outputSchema.
	output string
	// problems says why an invalid answer does not match the agent's outputSchema.
	problems string
	route
}

// answered reports whether the step gave an answer, whose digest its handoff record carries.
func (v verdict) answered() bool {
	return v.kind == resultTruncated || v.kind == resultInvalid || v.kind == resultAnswered
}

// classify says what the step amounted to and where it sends the run: a guard's trip ends it, a
// failure goes to the agent that recovers, a cut or invalid answer goes back to its agent, and
// the mode routes an answer. s is the status before the step.
func classify(p *Plan, s *v1alpha1.AgentRunStatus, res StepResult) verdict {
	if s.WrappingUp != nil {
		return wrapped(s, res)
	}
	v := verdict{res: res, output: res.Output}
	switch {
	case res.Trip != nil:
		v.kind = resultTripped
		v.route = route{end: res.Trip.Reason, outcome: v1alpha1.OutcomeFailed, reason: res.Trip.Message, message: res.Trip.Message}
	case res.Error != "":
		v.kind, v.route = resultFailed, route{fail: res.Error}
	case p.Agent(res.Agent) == nil:
		v.kind, v.route = resultFailed, route{fail: fmt.Sprintf("agent %s is not in the pinned config", quoteName(res.Agent))}
	case res.FinishReason == v1alpha1.FinishLength:
		v.kind, v.route = resultTruncated, truncated(s, res)
	default:
		v = answer(p, s, res)
	}
	if v.fail != "" {
		v.route = failStep(p, s, res, v.route)
	}
	return v
}

// answer classifies an answer: one that does not match the agent's outputSchema goes back to be
// repaired; the mode routes the others, normalized to their schema, with the declared signal
// they emit.
func answer(p *Plan, s *v1alpha1.AgentRunStatus, res StepResult) verdict {
	routed := res
	// A question is not the agent's answer: the schema is for answers.
	if res.InputRequired {
		return verdict{kind: resultAnswered, res: res, output: res.Output,
			route: route{await: true, outcome: v1alpha1.OutcomeSignal, reason: ReasonInputRequired}}
	}
	// A fan-out carries branches, not the agent's answer: the schema is for answers.
	if len(res.Parallel) > 0 {
		return verdict{kind: resultAnswered, res: res, output: res.Output, route: fanOut(p, s, res)}
	}
	// A supervisor's routing step carries a decision, not its answer: the schema is for answers.
	if res.Routing == nil {
		normalized, problems, ok := p.validateOutput(res.Agent, res.Output)
		if !ok {
			return verdict{kind: resultInvalid, res: res, output: res.Output, problems: problems, route: invalid(s, res, problems)}
		}
		routed.Output = normalized
	}
	routed.Signal = detectSignal(p, routed)
	return verdict{kind: resultAnswered, res: res, output: routed.Output, route: modes[p.Mode()].route(p, s, routed)}
}

// record writes the step into the status: its counts, its handoff record, the Events of its
// verdict and what later agents see of it.
func record(d *Update, v verdict, now time.Time) {
	s := &d.Status
	res := v.res
	count(s, v)
	inputDigest, outputDigest := StepDigests(res)
	rec := v1alpha1.HandoffRecord{
		Step:        s.StepCount,
		From:        res.Agent,
		To:          v.to,
		Time:        metav1.NewTime(now),
		Tokens:      res.Tokens,
		Cost:        res.Cost,
		ToolCalls:   res.ToolCalls,
		InputDigest: inputDigest,
		Outcome:     v.outcome,
		Reason:      statusText(v.reason, maxReason),
		Signal:      v.signal,
		Confidence:  v.confidence,
	}
	if v.answered() {
		rec.OutputDigest = outputDigest
	}
	appendRecord(s, rec)
	d.Events = append(d.Events, v.events...)
	addStepContext(d, v)
	if len(res.Ignored) > 0 {
		names := make([]string, len(res.Ignored))
		for i, n := range res.Ignored {
			names[i] = toolToken(n)
		}
		d.event(EventNormal, EventToolCallsIgnored, "step %d of agent %s called several tools; the first was used, these were ignored: %s",
			s.StepCount, res.Agent, strings.Join(names, ", "))
	}
}

// count counts the step, what it used, and what its verdict changes of the run's counts: a
// failure, a handoff, the mode's own.
func count(s *v1alpha1.AgentRunStatus, v verdict) {
	res := v.res
	s.StepCount++
	s.TokensUsed += res.Tokens - res.CountedTokens
	addCost(s, res.Result)
	s.ToolCalls += res.ToolCalls - res.CountedToolCalls
	s.TranscriptBytes += max(res.RecordBytes, 0)
	if s.AgentSteps == nil {
		s.AgentSteps = map[string]int32{}
	}
	s.AgentSteps[res.Agent]++
	if v.failed {
		s.ErrorCount++
	}
	if v.handoff {
		s.HandoffCount++
	}
	v.counts.apply(s)
}

// addStepContext adds what later agents see of the step: its answer, an invalid answer with why
// it does not match its schema, a cut answer, or why the step failed.
func addStepContext(d *Update, v verdict) {
	agent := v.res.Agent
	switch v.outcome {
	case v1alpha1.OutcomeFailed:
		addContext(d, agent, ContextFailed, v.reason)
	case v1alpha1.OutcomeTruncated:
		addContext(d, agent, ContextTruncated, v.output)
	case v1alpha1.OutcomeInvalid:
		addContext(d, agent, ContextOutput, v.output)
		addContext(d, agent, ContextInvalid, v.problems)
	default:
		addContext(d, agent, ContextOutput, v.output)
	}
}

// settle moves the run on from a recorded step: to its end, to a person's reply, or to the next
// agent, whose step the guards check first and after which a gate may hold the run. before is
// what the run had spent before the step.
func settle(p *Plan, d *Update, v verdict, before spent, now time.Time) {
	if v.end != "" {
		finish(p, d, v, now)
		return
	}
	warnTokens(p, d, before.tokens, now)
	warnCost(p, d, before.cost, now)
	if v.await {
		awaitInput(p, d, v.res.Agent, v.output, now)
		return
	}
	s := &d.Status
	if len(v.branches) > 0 {
		branchOut(p, d, v, now)
	} else {
		s.CurrentAgent, s.State, s.Input = v.to, v.state, statusText(v.input, maxInput)
		progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	}
	if t, ok := check(p, s, now); ok && !wrapUp(p, d, t, now) {
		end(d, t, now)
		return
	}
	// A limit already reached wins over the gate after the agent, unless the wrap-up agent
	// answers for it: then the gate holds what the agent did before that agent sees it.
	gateAfter(p, d, v, now)
}

// gateAfter opens the gate after the step's agent, if it has one, before the run goes on.
func gateAfter(p *Plan, d *Update, v verdict, now time.Time) {
	if g, ok := p.gateAt(stop{kind: stopAfterStep, agent: v.res.Agent, outcome: v.outcome}); ok {
		openGate(p, d, g, nil, now)
	}
}

// finish ends the run as the step decided, unless a gate holds its completion first.
func finish(p *Plan, d *Update, v verdict, now time.Time) {
	s := &d.Status
	if v.final {
		s.Output = statusText(v.output, maxOutput)
	}
	t := Trip{Reason: v.end, Message: fmt.Sprintf("%s at step %d", v.message, s.StepCount)}
	if v.kind == resultTripped {
		t = guarded(Trip{Reason: v.res.Trip.Reason, Message: v.res.Trip.Message, Loop: v.res.Trip.Loop})
		if wrapUp(p, d, t, now) {
			gateAfter(p, d, v, now)
			return
		}
	}
	done := &v1alpha1.Completion{Reason: t.Reason, Message: t.Message, State: v.state}
	if g, ok := p.gateAt(stop{kind: stopAfterStep, agent: v.res.Agent, outcome: v.outcome, ends: done}); ok {
		openGate(p, d, g, done, now)
		return
	}
	if v.state != "" {
		s.State = v.state // the final state a StateMachine reached
	}
	end(d, t, now)
}

// spent is what a run had spent before a step, for the warnings the step may carry it past.
type spent struct {
	tokens int64
	cost   decimal.Decimal
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

// failStep makes a step failed, to count against maxErrors, and hands control to the agent that
// recovers, or ends the run when no one can. s is the status before the step.
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
	step := s.StepCount + 1
	out.to, out.state = rc.to, rc.state
	out.input = fmt.Sprintf("step %d of agent %s failed: %s", step, res.Agent, why)
	if len(r.events) == 0 {
		out.events = append(out.events, Event{Type: EventWarning, Reason: EventStepFailed,
			Message: fmt.Sprintf("step %d of agent %s failed: %s; %s takes over", step, res.Agent, why, rc.to)})
	}
	return out
}
