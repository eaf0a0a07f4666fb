package workflow

import (
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
)

// TestNextAction is the reconcile's table of moves (docs/design/reconcile-actions.md): what the
// core asks the shell to do, given what the shell gathered.
func TestNextAction(t *testing.T) {
	p := mustPlan(t, team().Timeout(time.Hour))
	gated := gatedPlan(t, pipeline().GateTimeout("plan", time.Minute, "Reject"))
	fan := researchPlan(t, v1alpha1.Join{}, "")
	running := started(p)
	next := Next(p, &running)
	ended := Apply(p, running, StepResult{Agent: "lead", Input: "task", Result: Result{Output: "all done", Signal: "DONE"}}, t0).Status
	handoff := StepResult{Agent: "lead", Input: "task", Result: Result{Output: "over to you", Handoff: "worker"}}
	stepAt := func(state StepState) *StepFacts { return &StepFacts{Number: next.Number, State: state} }
	awaiting := atPlanGate(t, gated)
	limited := RateLimited(running, "the capacity of ModelEndpoint m", t0).Status
	held := HoldAtQuota(running, &QuotaHold{Quota: "team-a", Message: "the day's cost cap", Until: t0.Add(time.Hour)}, t0).Status
	pending := []decisions.Queued{decision(1, "approve", "plan", "alice")}

	for name, tc := range map[string]struct {
		facts Facts
		want  Action
		// check looks further at the action than its kind, need and delay.
		check func(t *testing.T, a Action)
	}{
		"a run that ended is finished, its branches cancelled": {
			facts: Facts{Now: t0, Status: ended, Cancelled: true},
			want:  Action{Kind: Finish},
		},
		"a cancel comes before people's decisions": {
			facts: Facts{Now: t0, Status: running, Cancelled: true, Cancel: "wrong input", Pending: pending},
			want:  Action{Kind: Write},
			check: phase(v1alpha1.PhaseCancelled),
		},
		"an eviction ends a started run": {
			facts: Facts{Now: t0, Status: running, Evicted: true, Eviction: "preempted"},
			want:  Action{Kind: Write},
			check: reason(v1alpha1.ReasonEvicted),
		},
		"a decision annotation the webhook did not take is taken first": {
			facts: Facts{Now: t0, Status: running, Intake: true, Pending: pending},
			want:  Action{Kind: TakeDecision},
		},
		"a Pending run's start is looked at": {
			facts: Facts{Now: t0},
			want:  Action{Kind: Look, Need: NeedStart},
		},
		"a start that cannot be ends the run": {
			facts: Facts{Now: t0, Start: &StartFacts{Problem: "spec.branch: the parent run p does not exist", ConfigFound: true}},
			want:  Action{Kind: Write},
			check: reason(v1alpha1.ReasonConfigInvalid),
		},
		"a branch run starts on its parent's config, admitted with it": {
			facts: Facts{Now: t0, Start: &StartFacts{Pinned: true}},
			want:  Action{Kind: Begin},
		},
		"a run waits Pending for its config": {
			facts: Facts{Now: t0, Start: &StartFacts{Config: "team"}},
			want:  Action{Kind: Write},
			check: condition(v1alpha1.ConditionConfigResolved, v1alpha1.ReasonConfigNotFound),
		},
		"a run looks again for a Secret, which is not watched": {
			facts: Facts{Now: t0, Start: &StartFacts{Config: "team", ConfigFound: true, MissingSecret: "agent lead needs its API key"}},
			want:  Action{Kind: Write, After: SecretRetry},
			check: condition(v1alpha1.ConditionConfigResolved, v1alpha1.ReasonSecretNotFound),
		},
		"a run nothing holds asks its quotas and Kueue": {
			facts: Facts{Now: t0, Start: &StartFacts{Config: "team", ConfigFound: true}},
			want:  Action{Kind: Admit},
		},
		"an admitted run starts": {
			facts: Facts{Now: t0, Start: &StartFacts{Config: "team", ConfigFound: true, Admission: &Admission{Admit: true}}},
			want:  Action{Kind: Begin},
		},
		"a run no LocalQueue can have ends": {
			facts: Facts{Now: t0, Start: &StartFacts{Config: "team", ConfigFound: true, Admission: &Admission{Invalid: "queue q is not a LocalQueue's name"}}},
			want:  Action{Kind: Write},
			check: reason(v1alpha1.ReasonConfigInvalid),
		},
		"a run its quotas hold writes its place and comes back sooner near the head": {
			facts: Facts{Now: t0, Start: &StartFacts{Config: "team", ConfigFound: true,
				Admission: &Admission{Reason: v1alpha1.ReasonQuotaExceeded, Message: "3 of 3 runs", Place: 2}}},
			want:  Action{Kind: WriteQueued, After: 1200 * time.Millisecond},
			check: condition(v1alpha1.ConditionProgressing, v1alpha1.ReasonQuotaExceeded),
		},
		"a run its quotas hold writes its new place at most every half minute": {
			facts: Facts{Now: t0, Status: queuedFor(v1alpha1.ReasonQuotaExceeded, "3 of 3 runs"), Start: &StartFacts{Config: "team", ConfigFound: true,
				Admission: &Admission{Reason: v1alpha1.ReasonQuotaExceeded, Message: "3 of 3 runs", Place: 1, Written: t0.Add(-QueuedRewrite / 2)}}},
			want: Action{Kind: Wait, After: 1100 * time.Millisecond},
		},
		"a run Kueue holds waits for its Workload once that is written": {
			facts: Facts{Now: t0, Status: queuedFor(v1alpha1.ReasonAwaitingAdmission, "waits in q"), Start: &StartFacts{Config: "team", ConfigFound: true,
				Admission: &Admission{Reason: v1alpha1.ReasonAwaitingAdmission, Message: "waits in q"}}},
			want: Action{Kind: Wait},
		},
		"a run Kueue holds writes what changed": {
			facts: Facts{Now: t0, Status: queuedFor(v1alpha1.ReasonAwaitingAdmission, "waits in q"), Start: &StartFacts{Config: "team", ConfigFound: true,
				Admission: &Admission{Reason: v1alpha1.ReasonAwaitingAdmission, Message: "waits in q", KueueChanged: true}}},
			want:  Action{Kind: Write},
			check: condition(v1alpha1.ConditionProgressing, v1alpha1.ReasonAwaitingAdmission),
		},
		"a Pending run applies its decisions before it starts": {
			facts: Facts{Now: t0, Pending: pending},
			want:  Action{Kind: Write},
		},
		"a replay run looks after its replay": {
			facts: Facts{Now: t0, Status: running, Replay: true},
			want:  Action{Kind: Replaying},
		},
		"a started run's plan is asked for": {
			facts: Facts{Now: t0, Status: running},
			want:  Action{Kind: Look, Need: NeedPlan},
		},
		"a run whose pinned config is gone fails": {
			facts: Facts{Now: t0, Status: running, PlanFailure: "the pinned config team-rev no longer exists"},
			want:  Action{Kind: Write},
			check: reason(v1alpha1.ReasonConfigInvalid),
		},
		"people's decisions are applied before the work": {
			facts: Facts{Now: t0.Add(time.Second), Status: awaiting, Plan: gated, Pending: pending},
			want:  Action{Kind: Write},
			check: phase(v1alpha1.PhaseRunning),
		},
		"a gate waits for its timeout": {
			facts: Facts{Now: t0.Add(20 * time.Second), Status: awaiting, Plan: gated},
			want:  Action{Kind: Wait, After: 40*time.Second + time.Millisecond},
		},
		"a gate past its timeout applies its onTimeout": {
			facts: Facts{Now: t0.Add(time.Minute), Status: awaiting, Plan: gated},
			want:  Action{Kind: Write},
			check: reason(v1alpha1.ReasonApprovalExpired),
		},
		"a run past its timeout ends before its next step": {
			facts: Facts{Now: t0.Add(time.Hour), Status: running, Plan: p},
			want:  Action{Kind: Write},
			check: reason(v1alpha1.ReasonTimeout),
		},
		"the step's state is asked for": {
			facts: Facts{Now: t0, Status: running, Plan: p},
			want:  Action{Kind: Look, Need: NeedStep},
			check: func(t *testing.T, a Action) {
				if a.Step.Number != 1 || a.Step.Agent != "lead" {
					t.Errorf("asked for step %d of %s; want step 1 of lead", a.Step.Number, a.Step.Agent)
				}
			},
		},
		"facts of another step are asked for again": {
			facts: Facts{Now: t0, Status: running, Plan: p, Step: &StepFacts{Number: 7, State: StepEnded}},
			want:  Action{Kind: Look, Need: NeedStep},
		},
		"a step not started starts": {
			facts: Facts{Now: t0, Status: running, Plan: p, Step: stepAt(StepNotStarted)},
			want:  Action{Kind: StartStep},
		},
		"a step just started is looked at again": {
			facts: Facts{Now: t0, Status: running, Plan: p, Step: &StepFacts{Number: 1, State: StepStarted, Started: true}},
			want:  Action{Kind: Look, Need: NeedStep},
		},
		"a running step waits until the run's timeout": {
			facts: Facts{Now: t0.Add(time.Minute), Status: running, Plan: p, Step: stepAt(StepRunning)},
			want:  Action{Kind: Wait, After: 59*time.Minute + time.Millisecond},
		},
		"a held status waits until it is due": {
			facts: Facts{Now: t0, Status: running, Plan: p, Step: stepAt(StepRunning), Held: HeldWrite{Due: t0.Add(time.Second)}},
			want:  Action{Kind: Wait, After: time.Second},
		},
		"a held status due is written": {
			facts: Facts{Now: t0.Add(time.Second), Status: running, Plan: p, Step: stepAt(StepRunning), Held: HeldWrite{Due: t0}},
			want:  Action{Kind: WriteHeld},
		},
		"a held status due is put off once after a step started": {
			facts: Facts{Now: t0.Add(time.Second), Status: running, Plan: p, Held: HeldWrite{Due: t0},
				Step: &StepFacts{Number: 1, State: StepRunning, Started: true}},
			want: Action{Kind: DeferHeld, After: time.Millisecond},
		},
		"a held status put off once is written": {
			facts: Facts{Now: t0.Add(time.Second), Status: running, Plan: p, Held: HeldWrite{Due: t0, Deferred: true},
				Step: &StepFacts{Number: 1, State: StepRunning, Started: true}},
			want: Action{Kind: WriteHeld},
		},
		"a step waiting for capacity a short while costs no write": {
			facts: Facts{Now: t0.Add(time.Second), Status: running, Plan: p,
				Step: &StepFacts{Number: 1, State: StepWaiting, WaitingSince: t0}},
			want: Action{Kind: Wait, After: time.Second},
		},
		"a step waiting for capacity longer says so": {
			facts: Facts{Now: t0.Add(3 * time.Second), Status: running, Plan: p,
				Step: &StepFacts{Number: 1, State: StepWaiting, WaitingSince: t0, WaitingFor: "the capacity of ModelEndpoint m"}},
			want:  Action{Kind: Write},
			check: condition(v1alpha1.ConditionProgressing, v1alpha1.ReasonRateLimited),
		},
		"a run that says it waits for capacity writes nothing more": {
			facts: Facts{Now: t0.Add(time.Minute), Status: limited, Plan: p,
				Step: &StepFacts{Number: 1, State: StepWaiting, WaitingSince: t0}},
			want: Action{Kind: Wait, After: 59*time.Minute + time.Millisecond},
		},
		"an ended step is written, and the run goes on": {
			facts: Facts{Now: t0, Status: running, Plan: p, Step: &StepFacts{Number: 1, State: StepEnded, Result: handoff}},
			want:  Action{Kind: Write, GoOn: true, Applied: true},
		},
		"an ended step is held while steps are batched": {
			facts: Facts{Now: t0, Status: running, Plan: p, Batch: time.Second, Step: &StepFacts{Number: 1, State: StepEnded, Result: handoff}},
			want:  Action{Kind: Hold, Applied: true},
		},
		"a step that ends the run is written, batched or not": {
			facts: Facts{Now: t0, Status: running, Plan: p, Batch: time.Second,
				Step: &StepFacts{Number: 1, State: StepEnded, Result: StepResult{Agent: "lead", Input: "task", Result: Result{Output: "done", Signal: "DONE"}}}},
			want:  Action{Kind: Write, Applied: true},
			check: phase(v1alpha1.PhaseSucceeded),
		},
		"a run held at its namespace's cap asks whether there is room": {
			facts: Facts{Now: t0, Status: held, Plan: p, Step: stepAt(StepNotStarted)},
			want:  Action{Kind: Look, Need: NeedRoom},
		},
		"a run held at its namespace's cap with no room looks again later": {
			facts: Facts{Now: t0, Status: held, Plan: p, Step: stepAt(StepNotStarted), Room: &Room{Until: t0.Add(time.Minute)}},
			want:  Action{Kind: Wait, After: HeldRetry},
		},
		"a run held at its namespace's cap with room takes its step": {
			facts: Facts{Now: t0, Status: held, Plan: p, Step: stepAt(StepNotStarted), Room: &Room{Free: true}},
			want:  Action{Kind: StartStep},
		},
		"a held run's step that got past its call releases the hold": {
			facts: Facts{Now: t0.Add(time.Minute), Status: held, Plan: p,
				Step: &StepFacts{Number: 1, State: StepEnded, Result: handoff, Released: t0.Add(30 * time.Second)}},
			want: Action{Kind: Write, GoOn: true, Applied: true},
			check: func(t *testing.T, a Action) {
				if a.Update.Status.QuotaHold != nil {
					t.Errorf("still held: %+v", a.Update.Status.QuotaHold)
				}
			},
		},
		"a run waiting for its branches asks for their runs": {
			facts: Facts{Now: t0, Status: branching(t, fan, "researcher", "critic"), Plan: fan},
			want:  Action{Kind: Look, Need: NeedBranches},
		},
		"a run waiting for its branches makes the missing ones": {
			facts: Facts{Now: t0, Status: branching(t, fan, "researcher", "critic"), Plan: fan, Branches: map[string]BranchRun{}},
			want:  Action{Kind: MakeBranches},
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := NextAction(tc.facts)
			if a.Kind != tc.want.Kind || a.Need != tc.want.Need || a.After != tc.want.After || a.GoOn != tc.want.GoOn || a.Applied != tc.want.Applied {
				t.Fatalf("got %s (need %d, after %s, go on %t, applied %t); want %s (need %d, after %s, go on %t, applied %t)",
					kinds[a.Kind], a.Need, a.After, a.GoOn, a.Applied, kinds[tc.want.Kind], tc.want.Need, tc.want.After, tc.want.GoOn, tc.want.Applied)
			}
			if tc.check != nil {
				tc.check(t, a)
			}
		})
	}
}

// TestAJoinIsWrittenOnceItsBranchesEnded follows a fan-out to its join: the branches that still
// run are waited for, and once they ended the join is written and the run goes on.
func TestAJoinIsWrittenOnceItsBranchesEnded(t *testing.T) {
	fan := researchPlan(t, v1alpha1.Join{}, "")
	st := branching(t, fan, "researcher", "critic")
	runs := map[string]BranchRun{}
	for _, b := range st.Branches {
		runs[b.Name] = BranchRun{Found: true, UID: "uid-" + b.Name, Phase: v1alpha1.PhaseRunning}
	}
	f := Facts{Now: t0.Add(time.Second), Status: st, Plan: fan, Branches: runs, BranchesMade: true, Trusted: true}
	if a := NextAction(f); a.Kind != HoldLazily {
		t.Fatalf("branch runs found: got %s; want their UIDs held for the next write", kinds[a.Kind])
	} else {
		f.Status = a.Update.Status
	}
	if a := NextAction(f); a.Kind != Wait {
		t.Fatalf("branches running: got %s; want a wait", kinds[a.Kind])
	}
	for name, r := range runs {
		r.Phase, r.Reason, r.Output = v1alpha1.PhaseSucceeded, v1alpha1.ReasonCompleted, "found "+name
		runs[name] = r
	}
	a := NextAction(f)
	if a.Kind != WriteJoin || !a.GoOn || a.Update.Status.Phase != v1alpha1.PhaseRunning {
		t.Fatalf("branches ended: got %s (go on %t, phase %s); want the join written and the run going on",
			kinds[a.Kind], a.GoOn, a.Update.Status.Phase)
	}
}

// kinds names the actions in failures.
var kinds = map[ActionKind]string{Wait: "Wait", Write: "Write", Hold: "Hold", HoldLazily: "HoldLazily",
	WriteHeld: "WriteHeld", DeferHeld: "DeferHeld", Look: "Look", StartStep: "StartStep", Begin: "Begin",
	Admit: "Admit", WriteQueued: "WriteQueued", TakeDecision: "TakeDecision", Replaying: "Replaying", MakeBranches: "MakeBranches", WriteJoin: "WriteJoin", Finish: "Finish"}

// queuedFor is a Pending run's status once Queued for reason, saying message.
func queuedFor(reason, message string) v1alpha1.AgentRunStatus {
	return Queue(v1alpha1.AgentRunStatus{}, reason, message, t0.Add(-time.Minute)).Status
}

func phase(want v1alpha1.RunPhase) func(*testing.T, Action) {
	return func(t *testing.T, a Action) {
		if a.Update.Status.Phase != want {
			t.Errorf("phase %s (%s); want %s", a.Update.Status.Phase, a.Update.Status.TerminationMessage, want)
		}
	}
}

func reason(want v1alpha1.TerminationReason) func(*testing.T, Action) {
	return func(t *testing.T, a Action) {
		if a.Update.Status.TerminationReason != want {
			t.Errorf("ended %s (%s); want %s", a.Update.Status.TerminationReason, a.Update.Status.TerminationMessage, want)
		}
	}
}

func condition(typ, want string) func(*testing.T, Action) {
	return func(t *testing.T, a Action) {
		c := conditionOf(a.Update.Status, typ)
		if c == nil || c.Reason != want {
			t.Errorf("%s condition %+v; want reason %s", typ, c, want)
		}
	}
}
