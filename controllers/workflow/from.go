package workflow

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/decisions"
)

// A run may start where an earlier run was after one of its steps (spec.from). The earlier
// run's status at that step is rebuilt from its transcript: its recorded steps are applied again,
// in order, to the config it pinned, exactly as they were first applied; no agent is called.

// RecordedStep is a step of an earlier run as its transcript holds it.
type RecordedStep struct {
	Result StepResult
	// Time is when the step ended.
	Time time.Time
	// Reply answers the step when it asked for input (an AwaitInput signal): the earlier run
	// was given it before its next step.
	Reply *decisions.Queued
}

// Replay rebuilds the status of a run that started at started with input, after its recorded
// steps. Human gates are passed: the earlier run went on past them. It fails when the steps do
// not follow one another (the transcript does not match the config) or the run had ended.
func Replay(p *Plan, input, revision string, started time.Time, steps []RecordedStep) (v1alpha1.AgentRunStatus, error) {
	q := *p
	q.replaying = true
	st := Start(&q, v1alpha1.AgentRunStatus{}, input, revision, started).Status
	for i, s := range steps {
		n := int32(i + 1)
		if st.Phase != v1alpha1.PhaseRunning {
			return st, fmt.Errorf("step %d does not follow: the run was %s after step %d", n, st.Phase, n-1)
		}
		if next := Next(&q, &st); next.Agent != s.Result.Agent {
			return st, fmt.Errorf("step %d was taken by %s, but %s has control after step %d in the pinned config", n, s.Result.Agent, next.Agent, n-1)
		}
		st = Apply(&q, st, s.Result, s.Time).Status
		if st.Phase == v1alpha1.PhaseAwaitingInput && i < len(steps)-1 {
			if s.Reply == nil {
				return st, fmt.Errorf("step %d asked for input and the transcript holds no reply", n)
			}
			st = Decide(&q, st, *s.Reply, s.Time).Status
		}
	}
	if st.Phase.Terminal() {
		return st, fmt.Errorf("the run ended %s at step %d: continue from an earlier step", st.TerminationReason, st.StepCount)
	}
	return st, nil
}

// StartFrom starts a run where an earlier one was: its replayed status, with the earlier run's
// counts, handoffs and state, the agent that had control, and the config it pinned. The run's
// own clock and decisions start afresh; input, when set, replaces the next agent's input.
func StartFrom(p *Plan, replayed v1alpha1.AgentRunStatus, input, from string, step int32, now time.Time) Update {
	d := Update{Status: *replayed.DeepCopy()}
	s := &d.Status
	start := metav1.NewMicroTime(now)
	s.StartTime, s.CompletionTime = &start, nil
	s.Waited, s.LastDecision, s.Approvals, s.Conditions = nil, 0, nil, nil
	s.PendingApproval = nil
	if input != "" {
		s.Input = bounded(input, maxInput)
	}
	msg := sprintf("pinned as %s, continuing run %s after step %d", s.ConfigRevision, from, step)
	setCondition(s, now, v1alpha1.ConditionConfigResolved, metav1.ConditionTrue, v1alpha1.ReasonConfigPinned, msg)
	message := runningMessage
	if s.Phase != v1alpha1.PhaseRunning {
		message = msg
	}
	progress(s, now, s.Phase, message)
	if s.Phase == v1alpha1.PhaseRunning {
		if t, ok := check(p, s, now); ok {
			end(&d, t, now)
		}
	}
	return d
}
