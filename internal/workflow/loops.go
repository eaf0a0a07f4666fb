package workflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The loop detectors look at the run's history: the steps still in the handoff sequence,
// without retries (a truncated answer asked again, or an answer sent back to be repaired to its
// schema, is neither a repeat nor a loop), followed by the step about to run. Each trips with
// the pattern and the steps it saw.

// isRetry reports whether the agent is asked again after this step.
func isRetry(r v1alpha1.HandoffRecord) bool {
	return r.Outcome == v1alpha1.OutcomeTruncated || (r.Outcome == v1alpha1.OutcomeInvalid && r.To != "")
}

// history is the steps the loop detectors look at, oldest first.
func history(st *v1alpha1.AgentRunStatus) []v1alpha1.HandoffRecord {
	out := make([]v1alpha1.HandoffRecord, 0, len(st.HandoffSequence))
	for _, r := range st.HandoffSequence {
		if !isRetry(r) {
			out = append(out, r)
		}
	}
	return out
}

// retrying reports whether the next step asks an agent again after a truncated or invalid answer.
func retrying(st *v1alpha1.AgentRunStatus) bool {
	n := len(st.HandoffSequence)
	return n > 0 && isRetry(st.HandoffSequence[n-1])
}

// loopGuard runs the loop detectors, except before a retry: asking an agent again after a cut
// or invalid answer never closes a loop.
func loopGuard(in guardInput) (Trip, bool) {
	if retrying(in.status) {
		return Trip{}, false
	}
	return firstTrip(loopDetectors, in)
}

// windowGuard: fewer than minUniqueAgents distinct agents among the last window steps,
// counting the step about to run.
func windowGuard(in guardInput) (Trip, bool) {
	w := int(in.plan.Loops.Window)
	if len(in.agents) < w {
		return Trip{}, false
	}
	agents, steps := in.agents[len(in.agents)-w:], in.steps[len(in.steps)-w:]
	distinct := map[string]bool{}
	for _, a := range agents {
		distinct[a] = true
	}
	if int32(len(distinct)) >= in.plan.Loops.MinUniqueAgents {
		return Trip{}, false
	}
	return loopTrip(v1alpha1.DetectorWindow, agents, steps, fmt.Sprintf(
		"loop detected (Window): the last %d steps, %s, have %d distinct agent(s), fewer than minUniqueAgents %d",
		w, stepList(agents, steps), len(distinct), in.plan.Loops.MinUniqueAgents))
}

// cycleGuard: a cycle of two or more agents repeated maxCycleRepeats times in a row at the end
// of the history, counting the step about to run. A cycle listed in loopDetection.allow may
// repeat up to its own maxRepeats instead.
func cycleGuard(in guardInput) (Trip, bool) {
	agents, steps := in.agents, in.steps
	for period := 2; period <= len(agents)/2; period++ {
		cycle := agents[len(agents)-period:]
		if hasShorterPeriod(cycle) {
			continue
		}
		repeats := trailingRepeats(agents, period)
		limit, allowed := in.plan.Loops.MaxCycleRepeats, false
		if bound, ok := allowedBound(in.plan.Loops.Allow, cycle); ok {
			// An allowed cycle may repeat maxRepeats times; the next repeat is a loop.
			limit, allowed = bound+1, true
		}
		if int32(repeats) < limit {
			continue
		}
		seen := steps[len(steps)-repeats*period:]
		msg := fmt.Sprintf("loop detected (Cycle): %s repeated %d times in a row at steps %s",
			strings.Join(append(slices.Clone(cycle), cycle[0]), " -> "), repeats, stepRange(seen))
		if allowed {
			msg += fmt.Sprintf(", past its allowed %d repeats", limit-1)
		} else {
			msg += fmt.Sprintf(" (maxCycleRepeats %d)", limit)
		}
		return loopTrip(v1alpha1.DetectorCycle, cycle, seen, msg)
	}
	return Trip{}, false
}

// repeatedInputGuard: the agent about to run was already given the same input often enough
// that this step would be redundant.
func repeatedInputGuard(in guardInput) (Trip, bool) {
	d := digest(in.status.Input)
	var seen []int32
	before := 0
	for i, r := range slices.Concat(in.earlier, in.hist) {
		if r.From == in.next && r.InputDigest == d {
			seen = append(seen, r.Step)
			if i < len(in.earlier) {
				before++
			}
		}
	}
	seen = append(seen, in.status.StepCount+1)
	if int32(len(seen)) < in.plan.Loops.MaxRepeatedInputs {
		return Trip{}, false
	}
	return loopTrip(v1alpha1.DetectorRepeatedInput, []string{in.next}, seen, fmt.Sprintf(
		"loop detected (RepeatedInput): %s would be given the same input (digest %s) for the %s time, at steps %s%s (maxRepeatedInputs %d)",
		in.next, d, ordinal(len(seen)), stepRange(seen), inEarlierTurns(before), in.plan.Loops.MaxRepeatedInputs))
}

// repeatedOutputGuard: the agent of the last step returned the same output as before, often
// enough to show it makes no progress.
func repeatedOutputGuard(in guardInput) (Trip, bool) {
	hist := in.hist
	if len(hist) == 0 {
		return Trip{}, false
	}
	last := hist[len(hist)-1]
	if last.OutputDigest == "" || last.Outcome == v1alpha1.OutcomeFailed {
		return Trip{}, false
	}
	var seen []int32
	before := 0
	for i, r := range slices.Concat(in.earlier, hist) {
		if r.From == last.From && r.OutputDigest == last.OutputDigest && r.Outcome != v1alpha1.OutcomeFailed {
			seen = append(seen, r.Step)
			if i < len(in.earlier) {
				before++
			}
		}
	}
	if int32(len(seen)) < in.plan.Loops.MaxRepeatedOutputs {
		return Trip{}, false
	}
	return loopTrip(v1alpha1.DetectorRepeatedOutput, []string{last.From}, seen, fmt.Sprintf(
		"loop detected (RepeatedOutput): %s returned the same output (digest %s) %d times, at steps %s%s (maxRepeatedOutputs %d)",
		last.From, last.OutputDigest, len(seen), stepRange(seen), inEarlierTurns(before), in.plan.Loops.MaxRepeatedOutputs))
}

// inEarlierTurns says how many of the steps named were earlier turns' of the session.
func inEarlierTurns(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them in earlier turns of the session given the same history)", n)
}

// trailingRepeats counts how many times the last period agents repeat back to back at the end.
func trailingRepeats(agents []string, period int) int {
	n := 1
	for end := len(agents) - period; end-period >= 0; end -= period {
		if !slices.Equal(agents[end-period:end], agents[len(agents)-period:]) {
			break
		}
		n++
	}
	return n
}

// hasShorterPeriod reports whether the cycle is itself a shorter cycle repeated (such as
// a,b,a,b, or a,a), which the shorter period covers.
func hasShorterPeriod(cycle []string) bool {
	for p := 1; p < len(cycle); p++ {
		if len(cycle)%p != 0 {
			continue
		}
		if trailingRepeats(cycle, p) == len(cycle)/p {
			return true
		}
	}
	return false
}

// allowedBound finds the allow entry for this cycle, in any rotation.
func allowedBound(allow []v1alpha1.AllowedCycle, cycle []string) (int32, bool) {
	for _, a := range allow {
		if len(a.Cycle) != len(cycle) {
			continue
		}
		for shift := range cycle {
			if slices.Equal(append(slices.Clone(cycle[shift:]), cycle[:shift]...), a.Cycle) {
				return a.MaxRepeats, true
			}
		}
	}
	return 0, false
}

func loopTrip(d v1alpha1.LoopDetector, pattern []string, steps []int32, msg string) (Trip, bool) {
	return Trip{
		Reason:  v1alpha1.ReasonLoopDetected,
		Message: msg,
		Loop:    &v1alpha1.LoopStatus{Detector: d, Pattern: slices.Clone(pattern), Steps: slices.Clone(steps)},
	}, true
}

// stepList renders agents with their step numbers: "a (4), b (5), a (next, 6)".
func stepList(agents []string, steps []int32) string {
	parts := make([]string, len(agents))
	for i := range agents {
		parts[i] = fmt.Sprintf("%s (%d)", agents[i], steps[i])
	}
	parts[len(parts)-1] = fmt.Sprintf("%s (next, %d)", agents[len(agents)-1], steps[len(steps)-1])
	return strings.Join(parts, ", ")
}

// stepRange renders step numbers as "3-8" when they are consecutive, else "3, 5, 9".
func stepRange(steps []int32) string {
	if len(steps) > 1 && steps[len(steps)-1]-steps[0] == int32(len(steps)-1) {
		return fmt.Sprintf("%d-%d", steps[0], steps[len(steps)-1])
	}
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	default:
		return fmt.Sprintf("%dth", n)
	}
}
