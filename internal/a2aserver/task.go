package a2aserver

import (
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TaskOf is the A2A task a run is: its ID is the run's name, its context the one the message
// that started it named; its state follows the run's phase, a person's decision it waits for
// being input-required; a run that succeeded gives its output as the task's artifact. Its
// metadata, under "baton", says where the run is.
func TaskOf(run *v1alpha1.AgentRun) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(run.Name), ContextID: run.Annotations[v1alpha1.AnnotationA2AContext]}
	t.Status = statusOf(run)
	st := &run.Status
	if st.Phase == v1alpha1.PhaseSucceeded && st.Output != "" {
		t.Artifacts = []*a2a.Artifact{{ID: a2a.ArtifactID(run.Name + "-output"), Name: "output", Parts: a2a.ContentParts{a2a.NewTextPart(st.Output)}}}
	}
	info := map[string]any{"namespace": run.Namespace, "run": run.Name, "phase": string(st.Phase),
		"steps": st.StepCount, "tokens": st.TokensUsed}
	if st.CurrentAgent != "" {
		info["agent"] = st.CurrentAgent
	}
	if st.TerminationReason != "" {
		info["reason"] = string(st.TerminationReason)
	}
	if st.Cost != "" {
		info["cost"], info["currency"] = st.Cost, st.Currency
	}
	t.Metadata = map[string]any{"baton": info}
	return t
}

// statusOf is the task status of the run's phase, with words for what it waits for or why it
// ended.
func statusOf(run *v1alpha1.AgentRun) a2a.TaskStatus {
	st := &run.Status
	say := func(state a2a.TaskState, text string) a2a.TaskStatus {
		s := a2a.TaskStatus{State: state}
		if text != "" {
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(text))
			m.ID, m.TaskID, m.ContextID = fmt.Sprintf("%s-%s-%d", run.Name, strings.ToLower(string(st.Phase)), st.StepCount),
				a2a.TaskID(run.Name), run.Annotations[v1alpha1.AnnotationA2AContext]
			s.Message = m
		}
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
			at := c.LastTransitionTime.Time
			s.Timestamp = &at
		}
		return s
	}
	switch st.Phase {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseQueued:
		why := ""
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
			why = c.Message
		}
		return say(a2a.TaskStateSubmitted, why)
	case v1alpha1.PhaseRunning:
		return say(a2a.TaskStateWorking, "")
	case v1alpha1.PhaseAwaitingInput:
		q := ""
		if st.PendingInput != nil {
			q = st.PendingInput.Question
		}
		return say(a2a.TaskStateInputRequired, q)
	case v1alpha1.PhaseAwaitingApproval:
		gate := ""
		if st.PendingApproval != nil {
			gate = st.PendingApproval.Gate
		}
		return say(a2a.TaskStateInputRequired, fmt.Sprintf("the run waits at gate %s for an approver's decision: kubectl baton approve %s %s -n %s (a message cannot pass a gate)",
			gate, run.Name, gate, run.Namespace))
	case v1alpha1.PhaseSucceeded:
		return say(a2a.TaskStateCompleted, "")
	case v1alpha1.PhaseCancelled:
		return say(a2a.TaskStateCanceled, st.TerminationMessage)
	default:
		return say(a2a.TaskStateFailed, fmt.Sprintf("%s: %s", st.TerminationReason, st.TerminationMessage))
	}
}

// settled reports whether a task waits for its caller or ended: what a blocking send and a
// stream wait for.
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired
}
