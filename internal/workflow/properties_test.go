package workflow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/scripted"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/workflow"
)

// These properties hold for every workflow, not just the examples: rapid generates random
// teams, handoff graphs, state machines, limits and scripts, and plays each run to its end
// through the Scripted provider. RAPID_CHECKS sets how many cases run (make test-unit: 500).

// scriptedAgent is the Scripted provider alone: the core's tests link none of the others.
var scriptedAgent = scripted.New(agents.Dependencies{})

// genConfig draws a config whose agents are Scripted with random turns.
func genConfig(t *rapid.T) v1alpha1.AgentConfigSpec {
	n := workflow.Uniform(t, 1, 5, "agents")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("a%d", i)
	}
	signals := []v1alpha1.Signal{
		{Name: "END", Action: v1alpha1.ActionTerminate},
		{Name: "DONE", Action: v1alpha1.ActionComplete},
		{Name: "NEXT", Action: v1alpha1.ActionNone},
		{Name: "OTHER", Action: v1alpha1.ActionNone},
		{Name: "ASK", Action: v1alpha1.ActionAwaitInput},
	}
	// Signals the turns may emit, including one that is not declared.
	emitted := []string{"", "", "", "END", "DONE", "NEXT", "NEXT", "NEXT", "OTHER", "OTHER", "OTHER", "UNDECLARED", "ASK"}
	targets := append(slices.Clone(names), names...)
	targets = append(targets, "stranger")
	spec := v1alpha1.AgentConfigSpec{Mode: v1alpha1.ModeSwarm, Entrypoint: names[0], Signals: signals}
	for _, name := range names {
		a := v1alpha1.Agent{Name: name, Terminator: workflow.Chance(t, 25, "terminator")}
		for _, h := range names {
			if workflow.Chance(t, 75, "handoff") {
				a.Handoffs = append(a.Handoffs, h)
			}
		}
		if workflow.Chance(t, 20, "agentMaxSteps") {
			a.MaxSteps = ptr.To(int32(workflow.Uniform(t, 1, 10, "maxSteps")))
		}
		for range workflow.Uniform(t, 1, 6, "turns") {
			turn := v1alpha1.ScriptTurn{
				Output: workflow.Pick(t, []string{"same", "again", "progress"}, "output"),
				Tokens: int64(workflow.Uniform(t, 0, 500, "tokens")),
				Signal: workflow.Pick(t, emitted, "signal"),
			}
			if workflow.Chance(t, 60, "unique") {
				turn.Output += fmt.Sprint(" ", workflow.Uniform(t, 0, 1<<20, "suffix"))
			}
			switch {
			case !workflow.Chance(t, 75, "handsOff"):
			case len(a.Handoffs) > 0 && workflow.Chance(t, 85, "allowedTarget"):
				turn.Handoff = workflow.Pick(t, a.Handoffs, "target")
			default:
				turn.Handoff = workflow.Pick(t, targets, "anyTarget")
			}
			switch workflow.Uniform(t, 0, 19, "fault") {
			case 0:
				turn.Error = "scripted failure"
			case 1:
				turn.FinishReason = v1alpha1.FinishLength
			}
			a.Script = append(a.Script, turn)
		}
		spec.Agents = append(spec.Agents, a)
	}
	mode := workflow.Uniform(t, 0, 2, "mode")
	if mode == 2 && n >= 2 {
		spec.Mode = v1alpha1.ModeSupervisor
		spec.Routing = &v1alpha1.Routing{Supervisor: names[0], MinConfidence: ptr.To(0.5), MaxReroutes: ptr.To(int32(workflow.Uniform(t, 0, 3, "reroutes")))}
		if workflow.Chance(t, 50, "defaultAgent") {
			spec.Routing.DefaultAgent = names[n-1]
		}
		spec.Limits.MaxHandoffDepth = ptr.To(int32(workflow.Uniform(t, 1, 3, "depth")))
		for i := range spec.Agents[0].Script {
			if workflow.Chance(t, 70, "routes") {
				spec.Agents[0].Script[i].Routing = &v1alpha1.RoutingDecision{
					Target:     workflow.Pick(t, append(slices.Clone(names), "nobody"), "routeTarget"),
					Confidence: ptr.To(float64(workflow.Uniform(t, 0, 10, "confidence")) / 10),
					Fallback:   workflow.Pick(t, append(slices.Clone(names), ""), "fallback"),
				}
			}
		}
	}
	if mode == 1 {
		spec.Mode = v1alpha1.ModeStateMachine
		k := workflow.Uniform(t, 1, 6, "states")
		stateNames := make([]string, k)
		for i := range stateNames {
			stateNames[i] = fmt.Sprintf("S%d", i)
		}
		for i, sn := range stateNames {
			st := v1alpha1.State{Name: sn}
			if i == 0 || workflow.Chance(t, 80, "hasAgent") {
				st.Agent = workflow.Pick(t, names, "stateAgent")
				st.Transitions = map[string]string{}
				for _, sig := range []string{"END", "DONE", "NEXT", "OTHER"} {
					if workflow.Chance(t, 75, "transition") {
						st.Transitions[sig] = workflow.Pick(t, stateNames, "to")
					}
				}
				if workflow.Chance(t, 50, "onError") {
					st.OnError = workflow.Pick(t, stateNames, "onErrorTo")
				}
			}
			spec.States = append(spec.States, st)
		}
	}
	depth := spec.Limits.MaxHandoffDepth
	spec.Limits = v1alpha1.Limits{
		MaxHandoffDepth: depth,
		MaxHandoffs:     ptr.To(int32(workflow.Uniform(t, 1, 40, "maxHandoffs"))),
		MaxSteps:        ptr.To(int32(workflow.Uniform(t, 1, 50, "maxSteps"))),
		MaxTokens:       ptr.To(int64(workflow.Uniform(t, 1, 20000, "maxTokens"))),
		MaxErrors:       ptr.To(int32(workflow.Uniform(t, 1, 8, "maxErrors"))),
		Timeout:         v1alpha1.NewDuration(time.Duration(workflow.Uniform(t, 1, 600, "timeoutSeconds")) * time.Second),
	}
	if workflow.Chance(t, 30, "wrapUp") {
		spec.Limits.WrapUp = &v1alpha1.WrapUp{Agent: workflow.Pick(t, names, "wrapUpAgent")}
	}
	window := int32(workflow.Uniform(t, 2, 8, "window"))
	spec.LoopDetection = v1alpha1.LoopDetection{
		Window:             ptr.To(window),
		MinUniqueAgents:    ptr.To(int32(workflow.Uniform(t, 1, int(window), "minUnique"))),
		MaxCycleRepeats:    ptr.To(int32(workflow.Uniform(t, 2, 12, "cycleRepeats"))),
		MaxRepeatedInputs:  ptr.To(int32(workflow.Uniform(t, 2, 12, "repeatedInputs"))),
		MaxRepeatedOutputs: ptr.To(int32(workflow.Uniform(t, 2, 12, "repeatedOutputs"))),
	}
	for i, name := range names {
		if workflow.Chance(t, 25, "gateAfter") {
			spec.Approvals = append(spec.Approvals, v1alpha1.ApprovalGate{Name: fmt.Sprintf("after-%d", i), After: name,
				Required: int32(workflow.Uniform(t, 1, 2, "required")), OnTimeout: workflow.Pick(t, []string{"Reject", "Approve"}, "onTimeout")})
		}
	}
	if workflow.Chance(t, 30, "gateComplete") {
		spec.Approvals = append(spec.Approvals, v1alpha1.ApprovalGate{Name: "final", Before: "Complete", Required: 1, OnTimeout: "Reject"})
	}
	for i := range spec.Approvals {
		if workflow.Chance(t, 30, "gateTimeout") {
			spec.Approvals[i].Timeout = v1alpha1.NewDuration(time.Duration(workflow.Uniform(t, 1, 30, "gateSeconds")) * time.Second)
		}
	}
	if n >= 2 && rapid.Bool().Draw(t, "allow") {
		spec.LoopDetection.Allow = []v1alpha1.AllowedCycle{{Cycle: names[:2], MaxRepeats: int32(workflow.Uniform(t, 1, 10, "allowRepeats"))}}
	}
	return spec
}

// played is a run played to its end, with every status it went through.
type played struct {
	plan     *workflow.Plan
	statuses []v1alpha1.AgentRunStatus
	now      time.Time
	maxStep  int64
	// seen are the handoff records the steps started with (each step's transcript record
	// carries the one before it), results each step's result by number.
	seen    []v1alpha1.HandoffRecord
	results map[int32]workflow.StepResult
	// wrapSteps are the steps taken while a wrap-up agent had the last turn, wrapDecisions the
	// decisions people made then (a rejection may send the answer back for one more).
	wrapSteps, wrapDecisions int
}

func (p played) final() v1alpha1.AgentRunStatus { return p.statuses[len(p.statuses)-1] }

// play runs a config through the Scripted provider until the run ends, advancing a fake clock
// by a random step duration each step. It stops after maxSteps+1 steps whatever happens.
func play(t *rapid.T, spec v1alpha1.AgentConfigSpec, tl timeline) played {
	plan, errs := workflow.NewPlan(spec, nil)
	if len(errs) > 0 {
		t.Fatalf("generated an invalid config: %v", errs)
	}
	now := t0
	plan = plan.ForRun("run", "ns", v1alpha1.ApprovalsRequired, "")
	out := played{plan: plan, results: map[int32]workflow.StepResult{}}
	st := workflow.Start(plan, v1alpha1.AgentRunStatus{}, "the task", "rev", now).Status
	out.statuses = append(out.statuses, st)
	var seq int64
	decided := 0
	for i := 0; !st.Phase.Terminal(); i++ {
		if int(st.StepCount)-out.wrapSteps > int(plan.Limits.MaxSteps) || decided > 200 {
			t.Fatalf("no end after %d steps and %d decisions: %+v", st.StepCount, decided, st)
		}
		if st.Phase == v1alpha1.PhaseAwaitingApproval || st.Phase == v1alpha1.PhaseAwaitingInput {
			// People decide: sometimes late (the gate may time out), sometimes wrongly.
			now = now.Add(time.Duration(tl.at(tl.thinkSeconds, decided)) * time.Second)
			if d, expired := workflow.CheckWaiting(plan, st, now); expired {
				st = d.Status
				out.statuses = append(out.statuses, st)
				continue
			}
			seq++
			decided++
			if st.WrappingUp != nil {
				out.wrapDecisions++
			}
			q := decisionAt(tl, plan, st, seq)
			if decided%4 == 0 {
				// Someone new eventually makes the right call.
				q = decisions.Queued{Seq: seq, By: fmt.Sprint("reviewer-", seq), Action: decisions.Reply, Reply: "yes"}
				if st.PendingApproval != nil {
					q.Action, q.Gate = decisions.Approve, st.PendingApproval.Gate
				}
			}
			st = workflow.Decide(plan, st, q, now).Status
			out.statuses = append(out.statuses, st)
			continue
		}
		if d, tripped := workflow.Check(plan, st, now); tripped {
			st = d.Status
			out.statuses = append(out.statuses, st)
			if d.Ended() {
				break
			}
			continue // the wrap-up agent has the last turn
		}
		step := workflow.Next(plan, &st)
		res := workflow.StepResult{Agent: step.Agent, Input: step.Input}
		r, err := scriptedAgent.Step(context.Background(), &agents.Request{Agent: *plan.Agent(step.Agent), Turn: step.Turn, Input: step.Input})
		if err != nil {
			res.Error = err.Error()
		}
		if r != nil {
			res.Result = *r
		}
		out.maxStep = max(out.maxStep, res.Tokens)
		now = now.Add(time.Duration(tl.at(tl.stepSeconds, i)) * time.Second)
		if n := len(st.HandoffSequence); n > 0 {
			out.seen = append(out.seen, st.HandoffSequence[n-1])
		}
		out.results[step.Number] = res
		if st.WrappingUp != nil {
			out.wrapSteps++
		}
		st = workflow.Apply(plan, st, res, now).Status
		out.statuses = append(out.statuses, st)
	}
	out.now = now
	return out
}

// decisionAt is what a person annotates as the run's seq-th decision: mostly the right one,
// sometimes a wrong one.
func decisionAt(tl timeline, p *workflow.Plan, st v1alpha1.AgentRunStatus, seq int64) decisions.Queued {
	i := int(seq)
	q := decisions.Queued{Seq: seq, By: []string{"alice", "bob", "carol"}[tl.at(tl.by, i)]}
	gate := "none"
	if st.PendingApproval != nil {
		gate = st.PendingApproval.Gate
	}
	switch tl.at(tl.choices, i) {
	case 0:
		q.Action, q.Gate = decisions.Approve, "no-such-gate"
	case 1:
		q.Action, q.Reply = decisions.Reply, "an answer"
	case 2:
		q.Action, q.Gate = decisions.Reject, gate
		q.Revise = []string{"", "replan", p.Spec.Agents[0].Name, "ghost"}[tl.at(tl.revises, i)]
	default:
		if st.Phase == v1alpha1.PhaseAwaitingInput {
			q.Action, q.Reply = decisions.Reply, fmt.Sprint("answer ", seq)
		} else {
			q.Action, q.Gate = decisions.Approve, gate
		}
	}
	return q
}

// timeline is what happens around a run, drawn up front so that replays are identical: how
// long steps take, and what people decide, when.
type timeline struct {
	stepSeconds  []int
	thinkSeconds []int
	choices      []int
	revises      []int
	by           []int
}

func drawDurations(t *rapid.T) timeline {
	draw := func(n, lo, hi int, label string) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = workflow.Uniform(t, lo, hi, label)
		}
		return out
	}
	return timeline{
		stepSeconds:  draw(workflow.Uniform(t, 1, 8, "durations"), 0, 5, "stepSeconds"),
		thinkSeconds: draw(workflow.Uniform(t, 1, 6, "thinks"), 0, 40, "thinkSeconds"),
		choices:      draw(workflow.Uniform(t, 1, 8, "choices"), 0, 9, "decision"),
		revises:      draw(workflow.Uniform(t, 1, 4, "revises"), 0, 3, "revise"),
		by:           draw(workflow.Uniform(t, 1, 4, "people"), 0, 2, "by"),
	}
}

func (tl timeline) at(xs []int, i int) int { return xs[i%len(xs)] }

// peopleReasons are the ends people decide.
var peopleReasons = []v1alpha1.TerminationReason{v1alpha1.ReasonRejected, v1alpha1.ReasonApprovalExpired, v1alpha1.ReasonCancelled}

// wrappable are the limits a wrap-up agent answers for.
var wrappable = []v1alpha1.TerminationReason{
	v1alpha1.ReasonTimeout, v1alpha1.ReasonMaxStepsExceeded, v1alpha1.ReasonMaxHandoffsExceeded,
	v1alpha1.ReasonTokenBudgetExceeded, v1alpha1.ReasonCostBudgetExceeded,
}

func TestPropertyARunWithAWrapUpAgentEndsWithItsAnswerNotItsLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genConfig(t)
		if spec.Limits.WrapUp == nil {
			spec.Limits.WrapUp = &v1alpha1.WrapUp{Agent: spec.Agents[len(spec.Agents)-1].Name}
		}
		run := play(t, spec, drawDurations(t))
		st := run.final()
		if slices.Contains(wrappable, st.TerminationReason) && st.WrappingUp == nil {
			t.Fatalf("ended %s without the wrap-up agent's turn: %s", st.TerminationReason, st.TerminationMessage)
		}
		if st.TerminationReason == v1alpha1.ReasonWrappedUp {
			last := st.HandoffSequence[len(st.HandoffSequence)-1]
			if st.WrappingUp == nil || st.Phase != v1alpha1.PhaseSucceeded || last.Outcome != v1alpha1.OutcomeFinal ||
				!strings.Contains(st.TerminationMessage, string(st.WrappingUp.Message[:min(20, len(st.WrappingUp.Message))])) {
				t.Fatalf("WrappedUp without its evidence: %+v, last step %+v", st, last)
			}
		}
	})
}

// guardReasons can only come from the guard chain.
var guardReasons = []v1alpha1.TerminationReason{
	v1alpha1.ReasonTimeout, v1alpha1.ReasonMaxStepsExceeded, v1alpha1.ReasonMaxHandoffsExceeded,
	v1alpha1.ReasonTokenBudgetExceeded, v1alpha1.ReasonAgentStepLimitExceeded, v1alpha1.ReasonLoopDetected,
}

func TestPropertyEveryRunEndsWithinItsLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genConfig(t)
		run := play(t, spec, drawDurations(t))
		st, l := run.final(), run.plan.Limits

		if !st.Phase.Terminal() || st.TerminationReason == "" || st.TerminationMessage == "" {
			t.Fatalf("the run did not end with a reason and a message: %+v", st)
		}
		if st.Phase != st.TerminationReason.Phase() {
			t.Fatalf("phase %s does not match reason %s", st.Phase, st.TerminationReason)
		}
		// A wrap-up turn is the one step past a limit.
		if run.wrapSteps > 1 {
			t.Fatalf("%d wrap-up turns", run.wrapSteps)
		}
		if st.StepCount-int32(run.wrapSteps) > l.MaxSteps || st.HandoffCount > l.MaxHandoffs || st.ErrorCount > l.MaxErrors {
			t.Fatalf("a count passed its limit: steps %d/%d handoffs %d/%d errors %d/%d",
				st.StepCount, l.MaxSteps, st.HandoffCount, l.MaxHandoffs, st.ErrorCount, l.MaxErrors)
		}
		if st.TokensUsed >= l.MaxTokens+run.maxStep*int64(1+run.wrapSteps) && st.TokensUsed > 0 {
			t.Fatalf("tokens %d passed the budget %d by more than one step (%d)", st.TokensUsed, l.MaxTokens, run.maxStep)
		}
		for name, n := range st.AgentSteps {
			if a := run.plan.Agent(name); a.MaxSteps != nil && n-int32(run.wrapSteps) > *a.MaxSteps {
				t.Fatalf("agent %s took %d steps, its limit is %d", name, n, *a.MaxSteps)
			}
		}
		if len(st.HandoffSequence) > workflow.HistoryLength {
			t.Fatalf("the sequence holds %d records", len(st.HandoffSequence))
		}
	})
}

func TestPropertyTerminationIsSetOnceAndMatchesTheFirstGuard(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		run := play(t, genConfig(t), drawDurations(t))
		st := run.final()
		for i, s := range run.statuses[:len(run.statuses)-1] {
			if s.TerminationReason != "" || s.Phase.Terminal() {
				t.Fatalf("status %d already ended (%s) before the last one", i, s.TerminationReason)
			}
		}
		// Nothing changes an ended run.
		again := workflow.Apply(run.plan, st, workflow.StepResult{Agent: st.CurrentAgent, Result: workflow.Result{Output: "late", Signal: "DONE"}}, run.now.Add(time.Hour))
		if diff := cmp.Diff(st, again.Status); diff != "" || len(again.Events) != 0 {
			t.Fatalf("an ended run changed:\n%s", diff)
		}
		if _, ok := workflow.Check(run.plan, st, run.now.Add(time.Hour)); ok {
			t.Fatalf("Check ended an ended run again")
		}
		// A run a guard ended ended with the first guard of the chain that trips (a run whose
		// wrap-up turn failed ended for the limit that gave it that turn).
		if st.WrappingUp != nil {
			if st.TerminationReason != v1alpha1.ReasonWrappedUp && st.TerminationReason != st.WrappingUp.Limit &&
				!slices.Contains(peopleReasons, st.TerminationReason) {
				t.Fatalf("a run wrapping up after %s ended %s", st.WrappingUp.Limit, st.TerminationReason)
			}
		} else if slices.Contains(guardReasons, st.TerminationReason) {
			open := st.DeepCopy()
			open.Phase = v1alpha1.PhaseRunning
			trip, ok := workflow.FirstTrip(run.plan, open, run.now)
			if !ok || trip.Reason != st.TerminationReason {
				t.Fatalf("ended %s, but the first guard to trip is %q", st.TerminationReason, trip.Reason)
			}
			if (st.TerminationReason == v1alpha1.ReasonLoopDetected) != (st.Loop != nil) {
				t.Fatalf("status.loop %v does not match reason %s", st.Loop, st.TerminationReason)
			}
		}
	})
}

func TestPropertyOnlyTerminatorsTerminate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		run := play(t, genConfig(t), drawDurations(t))
		st := run.final()
		if st.TerminationReason != v1alpha1.ReasonTerminated {
			return
		}
		last := st.HandoffSequence[len(st.HandoffSequence)-1]
		if !run.plan.Agent(last.From).Terminator {
			t.Fatalf("%s ended the run Terminated but is not a terminator", last.From)
		}
	})
}

func TestPropertyRunsAreDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec, durations := genConfig(t), drawDurations(t)
		first, second := play(t, spec, durations), play(t, spec, durations)
		if diff := cmp.Diff(first.statuses, second.statuses); diff != "" {
			t.Fatalf("the same config and script gave different runs:\n%s", diff)
		}
	})
}

// An allowed cycle whose outputs keep changing is progress: it is never flagged before it has
// repeated more than its own bound.
func TestPropertyAllowedProgressingCyclesAreNotLoops(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		length := workflow.Uniform(t, 2, 4, "cycleLength")
		bound := int32(workflow.Uniform(t, 1, 50/length-1, "maxRepeats"))
		cycle := make([]string, length)
		spec := v1alpha1.AgentConfigSpec{Mode: v1alpha1.ModeSwarm}
		for i := range cycle {
			cycle[i] = fmt.Sprintf("a%d", i)
		}
		for i, name := range cycle {
			spec.Agents = append(spec.Agents, v1alpha1.Agent{Name: name, Handoffs: []string{cycle[(i+1)%length]}})
		}
		spec.Entrypoint = cycle[0]
		spec.Limits = v1alpha1.Limits{MaxSteps: ptr.To[int32](200), MaxHandoffs: ptr.To[int32](200)}
		spec.LoopDetection.Allow = []v1alpha1.AllowedCycle{{Cycle: cycle, MaxRepeats: bound}}
		plan, _ := workflow.NewPlan(spec, nil)
		st := workflow.Start(plan, v1alpha1.AgentRunStatus{}, "task", "rev", t0).Status
		for i := 0; !st.Phase.Terminal(); i++ {
			next := cycle[(slices.Index(cycle, st.CurrentAgent)+1)%length]
			st = workflow.Apply(plan, st, workflow.StepResult{Agent: st.CurrentAgent, Input: st.Input,
				Result: workflow.Result{Output: fmt.Sprintf("revision %d", i), Handoff: next}}, t0).Status
		}
		if st.TerminationReason != v1alpha1.ReasonLoopDetected || st.Loop.Detector != v1alpha1.DetectorCycle {
			t.Fatalf("want the cycle detector at the allowed bound, got %s: %s", st.TerminationReason, st.TerminationMessage)
		}
		if ran := st.StepCount; ran < int32(length)*(bound+1)-1 {
			t.Fatalf("flagged after %d steps, before %d repeats of a %d-agent cycle", ran, bound+1, length)
		}
	})
}

// TestPropertyTheWholeHistoryIsRestored checks that after any step of any run, the handoff
// sequence the loop detectors see is put together again from what status holds and what the
// transcript kept, as after an operator restart.
func TestPropertyTheWholeHistoryIsRestored(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := play(t, genConfig(t), drawDurations(t))
		if rapid.Bool().Draw(t, "long") {
			p = playLong(t)
		}
		for _, st := range p.statuses {
			whole := st.HandoffSequence
			stored := *st.DeepCopy()
			if got := workflow.StoreHistory(&stored); !cmp.Equal(got, whole) {
				t.Fatalf("StoreHistory changed the whole sequence")
			}
			if len(stored.HandoffSequence) > workflow.MaxStoredHandoffs || !workflow.IsStoredHistory(stored.HandoffSequence, whole) {
				t.Fatalf("status holds %d records", len(stored.HandoffSequence))
			}
			var seen []v1alpha1.HandoffRecord
			for _, r := range p.seen {
				if n := len(whole); n > 0 && r.Step < whole[n-1].Step {
					seen = append(seen, r) // only steps started before this status
				}
			}
			if got := workflow.RestoreHistory(stored.HandoffSequence, seen, p.results); !cmp.Equal(got, whole, cmpopts.EquateEmpty()) {
				t.Fatalf("restored history differs (-want +got):\n%s", cmp.Diff(whole, got, cmpopts.EquateEmpty()))
			}
		}
	})
}

// playLong plays a run of up to 80 steps around a ring of agents, whose answers repeat, fail or
// are cut at random: longer than status holds.
func playLong(t *rapid.T) played {
	length := workflow.Uniform(t, 2, 4, "ring")
	spec := v1alpha1.AgentConfigSpec{Mode: v1alpha1.ModeSwarm, Entrypoint: "a0"}
	for i := range length {
		spec.Agents = append(spec.Agents, v1alpha1.Agent{Name: fmt.Sprintf("a%d", i), Handoffs: []string{fmt.Sprintf("a%d", (i+1)%length)}})
	}
	steps := int32(workflow.Uniform(t, 11, 80, "steps"))
	spec.Limits = v1alpha1.Limits{MaxSteps: &steps, MaxHandoffs: ptr.To[int32](200), MaxErrors: ptr.To[int32](1000)}
	spec.LoopDetection = v1alpha1.LoopDetection{MaxCycleRepeats: ptr.To[int32](25), MaxRepeatedInputs: ptr.To[int32](50), MaxRepeatedOutputs: ptr.To[int32](50)}
	plan, errs := workflow.NewPlan(spec, nil)
	if len(errs) > 0 {
		t.Fatalf("invalid ring: %v", errs)
	}
	out := played{plan: plan, results: map[int32]workflow.StepResult{}}
	st := workflow.Start(plan, v1alpha1.AgentRunStatus{}, "task", "rev", t0).Status
	out.statuses = append(out.statuses, st)
	for i := 0; !st.Phase.Terminal(); i++ {
		if d, tripped := workflow.Check(plan, st, t0); tripped {
			st = d.Status
			out.statuses = append(out.statuses, st)
			break
		}
		step := workflow.Next(plan, &st)
		next := fmt.Sprintf("a%d", (slices.Index([]string{"a0", "a1", "a2", "a3"}, step.Agent)+1)%length)
		res := workflow.StepResult{Agent: step.Agent, Input: step.Input,
			Result: workflow.Result{Output: fmt.Sprintf("answer %d", workflow.Uniform(t, 0, 5, "answer")), Handoff: next}}
		switch workflow.Uniform(t, 0, 9, "outcome") {
		case 0:
			res.Error, res.Output = "the model server went away", ""
		case 1:
			res.FinishReason = v1alpha1.FinishLength
		}
		if n := len(st.HandoffSequence); n > 0 {
			out.seen = append(out.seen, st.HandoffSequence[n-1])
		}
		out.results[step.Number] = res
		st = workflow.Apply(plan, st, res, t0.Add(time.Duration(i)*time.Second)).Status
		out.statuses = append(out.statuses, st)
	}
	return out
}

// t0 is when the generated runs start.
var t0 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// TestPropertyContextIsWhatApplyRecords checks that what a step's record keeps of its context,
// decided before the step is applied (workflow.Context), is what Apply records for it, for
// every step of every generated run: answers, failures, cut and invalid answers, in every mode.
func TestPropertyContextIsWhatApplyRecords(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := play(t, genConfig(t), drawDurations(t))
		for i, st := range p.statuses {
			res, ok := p.results[st.StepCount+1]
			if !ok || st.Phase != v1alpha1.PhaseRunning {
				continue
			}
			want := workflow.Apply(p.plan, st, res, t0).Context
			if got := workflow.Context(p.plan, &st, res); !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
				t.Fatalf("status %d, step %d: Context %v, Apply records %v", i, st.StepCount+1, got, want)
			}
		}
	})
}
