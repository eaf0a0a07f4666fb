package workflow

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

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
	agent, state := modes[p.Mode()].start(p)
	return begin(p, st, input, revision, agent, state, now)
}

// StartTurn begins a turn of a session: a StateMachine team starts in the state the session's
// last turn led to (state), unless that state is final or no longer in the config; every other
// team, and a turn after a final state or a failed turn (state empty), starts as a run does.
func StartTurn(p *Plan, st v1alpha1.AgentRunStatus, input, revision, state string, now time.Time) Update {
	if s, ok := p.State(state); ok && p.Mode() == v1alpha1.ModeStateMachine && s.Agent != "" {
		return begin(p, st, input, revision, s.Agent, s.Name, now)
	}
	return Start(p, st, input, revision, now)
}

func begin(p *Plan, st v1alpha1.AgentRunStatus, input, revision, agent, state string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	start := metav1.NewMicroTime(now)
	s.Phase = v1alpha1.PhaseRunning
	s.StartTime = &start
	s.ConfigRevision = revision
	s.CurrentAgent = agent
	s.State = state
	s.Input = statusText(input, maxInput)
	taint(s, p.InputTaint())
	setCondition(s, now, v1alpha1.ConditionConfigResolved, metav1.ConditionTrue, v1alpha1.ReasonConfigPinned,
		fmt.Sprintf("pinned as %s", revision))
	progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	// No Event: status says the run started, and an Event is one more write per run.
	if agent == "" {
		end(&d, Trip{Reason: v1alpha1.ReasonCompleted, Message: fmt.Sprintf("the first state %s is final", state)}, now)
		return d
	}
	if t, ok := check(p, s, now); ok {
		endOrWrapUp(p, &d, t, now)
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
			Steps:    p.Limits.MaxSteps - st.StepCount - st.BranchSteps,
			Handoffs: p.Limits.MaxHandoffs - st.HandoffCount,
			Tokens:   p.Limits.MaxTokens - st.TokensUsed,
		},
	}
	if st.WrappingUp != nil {
		w := *st.WrappingUp
		step.WrapUp, step.Reason = &w, "a limit ran out"
		return step
	}
	step.MaxBranches = maxFanOut(p, st, st.CurrentAgent)
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

// Check runs the guards before the run's next step. When one trips, the update ends the run, or
// gives the wrap-up agent its last turn.
func Check(p *Plan, st v1alpha1.AgentRunStatus, now time.Time) (Update, bool) {
	if st.Phase != v1alpha1.PhaseRunning {
		return Update{}, false
	}
	t, ok := check(p, &st, now)
	if !ok {
		return Update{}, false
	}
	d := Update{Status: *st.DeepCopy()}
	endOrWrapUp(p, &d, t, now)
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
	if h := s.QuotaHold; h != nil {
		s.Waited, s.QuotaHold = addWait(s.Waited, now.Sub(h.Since.Time)), nil
	}
	conclude(s, now)
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
