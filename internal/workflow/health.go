package workflow

import (
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
