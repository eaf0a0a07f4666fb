package workflow

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A run's conditions say where it is in two vocabularies: Progressing, Baton's own, and the
// ones kstatus reads (Flux, Argo CD, kpt, kubectl wait): Reconciling while the run can still
// change, Stalled once it failed or was cancelled, Ready once it succeeded. They change
// together, at phase changes only, so a step's status write does not carry them.

// progress sets the conditions of a run that can still change, with its phase as the reason.
func progress(s *v1alpha1.AgentRunStatus, now time.Time, phase v1alpha1.RunPhase, message string) {
	setCondition(s, now, v1alpha1.ConditionProgressing, metav1.ConditionTrue, string(phase), message)
	setCondition(s, now, v1alpha1.ConditionReconciling, metav1.ConditionTrue, string(phase), message)
	setCondition(s, now, v1alpha1.ConditionReady, metav1.ConditionFalse, string(phase), message)
	meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionStalled)
}

// conclude sets the conditions of a run that ended, with its termination reason and message.
func conclude(s *v1alpha1.AgentRunStatus, now time.Time) {
	reason, message := string(s.TerminationReason), s.TerminationMessage
	setCondition(s, now, v1alpha1.ConditionProgressing, metav1.ConditionFalse, reason, message)
	meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReconciling)
	if s.Phase == v1alpha1.PhaseSucceeded {
		setCondition(s, now, v1alpha1.ConditionReady, metav1.ConditionTrue, reason, message)
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionStalled)
		return
	}
	setCondition(s, now, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	setCondition(s, now, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, message)
}

// Observe marks a status as the operator's view of the run's generation: in
// status.observedGeneration and in each condition, as kstatus and kubectl wait expect.
func Observe(s *v1alpha1.AgentRunStatus, generation int64) {
	s.ObservedGeneration = generation
	for i := range s.Conditions {
		s.Conditions[i].ObservedGeneration = generation
	}
}

// RateLimited says, in the run's Progressing condition, that its next step waits for its model
// endpoint's capacity: the run stays Running, and nothing counts against it but its time.
// waiting names the endpoint and says how long the step has waited.
func RateLimited(st v1alpha1.AgentRunStatus, waiting string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	msg := fmt.Sprintf("step %d of agent %s waits for %s; rate limits never fail a run",
		st.StepCount+1, st.CurrentAgent, waiting)
	setCondition(&d.Status, now, v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonRateLimited, msg)
	return d
}

// IsRateLimited reports whether the run's status says its step waits for capacity.
func IsRateLimited(st *v1alpha1.AgentRunStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
	return c != nil && c.Reason == v1alpha1.ReasonRateLimited
}
