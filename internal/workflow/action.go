package workflow

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
)

// A reconcile is gather, decide once, act: the shell gathers the Facts of a run, NextAction
// decides from them alone what comes next, and the shell carries the Action out. Where the
// decision needs a fact that costs a lookup (the step's state in the step runner, the room a
// run held at its namespace's cap has, the branch runs), NextAction asks for it with a Look,
// and the shell decides again with the answer: a reconcile reads no more than its decision
// needs, and the order of the moves is written here once, for the reconciler and for replay
// alike (docs/design/reconcile-actions.md has the table).

// Facts is what the shell knows of a run when it asks what to do next.
type Facts struct {
	// Now is the time of the decision.
	Now time.Time
	// Status is the run's status, whole: what the shell last wrote or holds to write.
	Status v1alpha1.AgentRunStatus
	// Plan is the plan of the run's pinned config, once asked for with LookPlan: nil before
	// then, and when it cannot be had (PlanFailure says why).
	Plan *Plan
	// PlanFailure says why the started run's plan cannot be had: the run fails ConfigInvalid.
	PlanFailure string
	// Cancelled is set when someone asked for the run to be cancelled, for the reason Cancel.
	Cancelled bool
	Cancel    string
	// Evicted is set when Kueue took the started run's admission back, for the reason Eviction.
	Evicted  bool
	Eviction string
	// Intake is set when a decision annotation waits to be taken into the run's queue.
	Intake bool
	// Pending are people's decisions queued on the run, in order.
	Pending []decisions.Queued
	// Replay is set for a run that replays a recorded one: its replay runs outside the reconcile.
	Replay bool
	// Batch is how long a step's status may be held to be written with the steps after it (0:
	// every step is written).
	Batch time.Duration
	// Held is the status decided and not yet written, if one is.
	Held HeldWrite
	// Step is the state of the step asked for with LookStep; nil until then.
	Step *StepFacts
	// Room is the answer to LookRoom: nil until then.
	Room *Room
	// Branches are the run's branch runs by name, once asked for with LookBranches; Made is
	// set once the missing ones were made (MakeBranches).
	Branches     map[string]BranchRun
	BranchesMade bool
	// Trusted is set when the admission webhook vouches for runs' creators and decisions.
	Trusted bool
	// Start is what a Pending run's start waits on, once asked for with LookStart; nil until
	// then.
	Start *StartFacts
}

// HeldWrite is what the shell holds of a run's status, not yet written.
type HeldWrite struct {
	// Due is when the held status must be written; zero when nothing is held, or when what is
	// held goes with the run's next write whenever that is.
	Due time.Time
	// Deferred is set once the due write was put off for other runs' steps to start first.
	Deferred bool
}

// StepState is where a run's step is.
type StepState int

// The states of a step.
const (
	StepNotStarted StepState = iota
	StepRunning
	StepWaiting
	StepEnded
	// StepStarted is a step this reconcile just started, whose state is to be looked up again
	// (it may wait for its endpoint's capacity already).
	StepStarted
)

// StepFacts is the state of the run's next step in the step runner.
type StepFacts struct {
	// Number is the step's: facts of another step than the run's next are stale.
	Number int32
	State  StepState
	// Result is the ended step's.
	Result StepResult
	// Started is set when this reconcile started the step.
	Started bool
	// WaitingSince and WaitingFor say, of a waiting step, since when and for what it waits.
	WaitingSince time.Time
	WaitingFor   string
	// Released is when the run, held at its namespace's cap, found room for the step; zero if
	// it did not.
	Released time.Time
}

// Room says whether a run held at its namespace's cap may take its step again.
type Room struct {
	Free bool
	// Until is when to look again, when not Free.
	Until time.Time
}

// ActionKind is what the shell does.
type ActionKind int

// The actions. Each one's row in docs/design/reconcile-actions.md says what the shell does.
const (
	// Wait: nothing to do until an event, or After.
	Wait ActionKind = iota
	// Write the Update as the run's status; with GoOn, decide again once it is stored (the
	// shell may write it later, as it writes what is held).
	Write
	// Hold the Update, to be written with the steps after it; decide again.
	Hold
	// HoldLazily holds the Update to go with the run's next write, whenever that is; decide
	// again.
	HoldLazily
	// WriteHeld writes what is held, now due.
	WriteHeld
	// DeferHeld puts the due write off a little, once, at low priority.
	DeferHeld
	// Look gathers the fact Need and decides again.
	Look
	// StartStep starts Step and decides again.
	StartStep
	// Admit asks the namespace's quotas, then Kueue, whether a Pending run may start, and
	// decides again. The run is counted from the moment they admit it.
	Admit
	// WriteQueued writes a Queued run's place in its quotas' line, and notes when.
	WriteQueued
	// Begin starts a Pending run that nothing holds: the config's pin, its start.
	Begin
	// TakeDecision moves a decision annotation into the run's queue.
	TakeDecision
	// Replaying looks after the replay that runs outside the reconcile.
	Replaying
	// MakeBranches makes the branch runs the status names and that have none; decide again.
	MakeBranches
	// WriteJoin writes the join's update: its input into the transcript first when the run goes on.
	WriteJoin
	// Finish looks after a run that ended: its Workload finished, the branches still running
	// cancelled, its time to live.
	Finish
)

// Need is a fact a Look asks for.
type Need int

// The facts a Look asks for.
const (
	NeedPlan Need = iota + 1
	NeedStep
	NeedRoom
	NeedBranches
	NeedStart
)

// Action is what NextAction decided.
type Action struct {
	Kind ActionKind
	// Update is what Write, Hold, HoldLazily and WriteJoin store.
	Update Update
	// Step is the step to start, or whose result the Update applies (Consumed once stored).
	Step Step
	// Applied is set when the Update applies Step's result.
	Applied bool
	// Need is what a Look asks for.
	Need Need
	// After is when to come back, at the latest (0: on an event only).
	After time.Duration
	// GoOn asks the shell to decide again once the Update is written.
	GoOn bool
	// Cancel names branch runs to cancel once the Update is written.
	Cancel []string
}

// RateLimitedAfter is how long a step waits for its endpoint's capacity before its run says so:
// a short wait costs no status write.
const RateLimitedAfter = 2 * time.Second

// NextAction decides what comes next for a run. The order: the end of the run, then a cancel,
// an eviction, people's decisions, the start, then the run's work.
func NextAction(f Facts) Action {
	st := f.Status
	switch {
	case st.Phase.Terminal():
		return Action{Kind: Finish, Cancel: BranchesToCancel(&st)}
	case f.Cancelled:
		return Action{Kind: Write, Update: Cancel(st, f.Cancel, f.Now)}
	case f.Evicted && st.Phase.Started():
		return Action{Kind: Write, Update: Evict(st, f.Eviction, f.Now)}
	case f.Intake:
		return Action{Kind: TakeDecision}
	case !st.Phase.Started() && len(f.Pending) > 0:
		return Action{Kind: Write, Update: DecideAll(nil, st, f.Pending, f.Now)}
	case !st.Phase.Started():
		return f.starting()
	case f.Replay:
		return Action{Kind: Replaying}
	case f.Plan == nil && f.PlanFailure == "":
		return Action{Kind: Look, Need: NeedPlan}
	case f.PlanFailure != "":
		return Action{Kind: Write, Update: Fail(st, v1alpha1.ReasonConfigInvalid, f.PlanFailure, f.Now)}
	case len(f.Pending) > 0:
		return Action{Kind: Write, Update: DecideAll(f.Plan, st, f.Pending, f.Now)}
	case st.Phase == v1alpha1.PhaseAwaitingApproval:
		if d, expired := CheckWaiting(f.Plan, st, f.Now); expired {
			return Action{Kind: Write, Update: d}
		}
		return Action{Kind: Wait, After: f.untilDeadline()}
	case st.Phase == v1alpha1.PhaseAwaitingInput:
		return Action{Kind: Wait}
	case Branching(&st):
		return f.branching()
	}
	if d, tripped := Check(f.Plan, st, f.Now); tripped {
		return Action{Kind: Write, Update: d}
	}
	return f.work(Next(f.Plan, &st))
}

// work is the run's next step: asked after, started, waited for, or applied.
func (f Facts) work(next Step) Action {
	if f.Step == nil || f.Step.Number != next.Number || f.Step.State == StepStarted {
		return Action{Kind: Look, Need: NeedStep, Step: next}
	}
	switch f.Step.State {
	case StepRunning:
		return f.whileRunning()
	case StepWaiting:
		return f.whileWaiting()
	case StepNotStarted:
		if f.Status.QuotaHold != nil {
			if f.Room == nil {
				return Action{Kind: Look, Need: NeedRoom}
			}
			if !f.Room.Free {
				return Action{Kind: Wait, After: HeldWait(f.Room.Until, f.Now)}
			}
		}
		return Action{Kind: StartStep, Step: next}
	}
	return f.apply(next)
}

// apply is the ended step applied: held while the run goes on and steps are batched, else
// written, and the run goes on from the status stored.
func (f Facts) apply(step Step) Action {
	st := f.Status
	if st.QuotaHold != nil && f.Step.Result.QuotaHold == nil {
		at := f.Step.Released
		if at.IsZero() {
			at = f.Now
		}
		st = ReleaseQuota(st, at).Status
	}
	d := Apply(f.Plan, st, f.Step.Result, f.Now)
	if MayHold(d, f.Batch) {
		return Action{Kind: Hold, Update: d, Step: step, Applied: true}
	}
	a := Action{Kind: Write, Update: d, Step: step, Applied: true}
	if h := d.Status.QuotaHold; h != nil && d.Status.Phase == v1alpha1.PhaseRunning {
		var until time.Time
		if h.Until != nil {
			until = h.Until.Time
		}
		a.After = HeldWait(until, f.Now)
		return a
	}
	a.GoOn = d.Status.Phase == v1alpha1.PhaseRunning && d.Status.StepCount == step.Number
	return a
}

// MayHold reports whether a step's update may be held while the run's next step starts: steps
// are batched (batch > 0), the run goes on, and it says nothing in Events (they follow the write
// that they explain). A held update is written once the batch period since the oldest change
// held has passed, after the next step has started, so the write is not in the way of the
// run's work.
func MayHold(d Update, batch time.Duration) bool {
	return batch > 0 && d.Status.Phase == v1alpha1.PhaseRunning && len(d.Events) == 0 && !Branching(&d.Status)
}

// whileRunning is what a run whose step runs waits for: its timeout, and, when what it did
// before the step is held, the write of it once it is due.
func (f Facts) whileRunning() Action {
	a := Action{Kind: Wait, After: f.untilDeadline()}
	if f.Held.Due.IsZero() {
		return a
	}
	wait := f.Held.Due.Sub(f.Now)
	switch {
	case wait <= 0 && f.Step != nil && f.Step.Started && !f.Held.Deferred:
		// This reconcile started a step: the write comes back at low priority, after the runs
		// whose steps ended meanwhile have started their next ones, so that a burst of writes
		// does not stand between runs and their next steps.
		return Action{Kind: DeferHeld, After: time.Millisecond}
	case wait <= 0:
		return Action{Kind: WriteHeld, Update: Update{Status: f.Status}}
	}
	a.After = Soonest(a.After, wait)
	return a
}

// whileWaiting is whileRunning for a run whose step waits for its endpoint's capacity: once it
// has waited RateLimitedAfter, the run says so in its Progressing condition (one write). The
// condition stays while the run's next steps wait in their turn, so a run paced step after step
// costs no write beyond its steps'.
func (f Facts) whileWaiting() Action {
	if IsRateLimited(&f.Status) {
		return f.whileRunning()
	}
	if left := f.Step.WaitingSince.Add(RateLimitedAfter).Sub(f.Now); left > 0 {
		a := f.whileRunning()
		a.After = Soonest(a.After, left)
		return a
	}
	return Action{Kind: Write, Update: RateLimited(f.Status, f.Step.WaitingFor, f.Now)}
}

// branching is a run that waits for its branches: the guards first, then its branch runs,
// made where missing, then the join.
func (f Facts) branching() Action {
	st := f.Status
	if d, tripped := Check(f.Plan, st, f.Now); tripped {
		return Action{Kind: Write, Update: d} // the run's end cancels its branches
	}
	if f.Branches == nil {
		return Action{Kind: Look, Need: NeedBranches}
	}
	if !f.BranchesMade {
		return Action{Kind: MakeBranches}
	}
	d, cancel := Join(f.Plan, st, f.Branches, f.Now)
	if !Branching(&d.Status) {
		return Action{Kind: WriteJoin, Update: d, Cancel: cancel, GoOn: d.Status.Phase == v1alpha1.PhaseRunning}
	}
	a := f.whileBranchesRun(d)
	if at, ok := JoinDeadline(f.Plan, &a.Update.Status); ok {
		a.After = Soonest(a.After, max(at.Sub(f.Now), 0)+time.Millisecond)
	}
	return a
}

// whileBranchesRun keeps what the join saw of a run's branches that still run (their ends, their
// waits for people) to be written with the join, or once the batch period has passed: a fan-out's
// branches that end one after another cost their parent one write, and the last one's end is
// not queued behind the writes of the others.
func (f Facts) whileBranchesRun(d Update) Action {
	switch {
	case len(d.Events) == 0 && equality.Semantic.DeepEqual(d.Status, f.Status):
		// Nothing new: what is held is written once it is due.
		return f.whileRunning()
	case onlyUIDs(f.Status, d.Status) && f.Trusted:
		// The UIDs of the branch runs just made wait for the run's next write: a restart
		// before it finds the runs again by their creator, which the trusted webhook stamped.
		// Untrusted, they are written as any change, lest a restart fail the run.
		return Action{Kind: HoldLazily, Update: d}
	case f.Batch > 0 && len(d.Events) == 0:
		return Action{Kind: Hold, Update: d}
	}
	return Action{Kind: Write, Update: d}
}

// onlyUIDs reports whether after differs from before in the UIDs of the branches alone, and in
// at least one.
func onlyUIDs(before, after v1alpha1.AgentRunStatus) bool {
	if len(before.Branches) != len(after.Branches) || equality.Semantic.DeepEqual(before.Branches, after.Branches) {
		return false
	}
	for i := range before.Branches {
		b, a := before.Branches[i], after.Branches[i]
		b.UID, a.UID = "", ""
		if b != a {
			return false
		}
	}
	b, a := before, after
	b.Branches, a.Branches = nil, nil
	return equality.Semantic.DeepEqual(b, a)
}

// untilDeadline is how long until the run's timeout, or its gate's, expires (0: none).
func (f Facts) untilDeadline() time.Duration {
	if f.Plan == nil || f.Status.Phase.Terminal() {
		return 0
	}
	deadline, ok := Deadline(f.Plan, &f.Status)
	if !ok {
		return 0
	}
	return max(deadline.Sub(f.Now), 0) + time.Millisecond
}

// HeldWait is how long a run held at its namespace's cap waits before it looks for room again:
// until its cap's period resets, or HeldRetry, whichever is sooner.
func HeldWait(until, now time.Time) time.Duration {
	if until.IsZero() {
		return HeldRetry
	}
	return min(max(until.Sub(now), 0)+time.Millisecond, HeldRetry)
}

// HeldRetry is how often a run held at its namespace's cap looks for room by itself.
const HeldRetry = 15 * time.Second

// Soonest is the sooner of two delays, 0 meaning none.
func Soonest(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}
