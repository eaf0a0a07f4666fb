package workflow

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// EventQueued is the Event of a run that starts waiting for room in its namespace's quota or
// for Kueue's admission.
const EventQueued = "Queued"

// Queue keeps a run that may not start yet in phase Queued: Progressing says why (reason
// QuotaExceeded or AwaitingAdmission) and names what holds it and the run's place. The run gets
// an Event when it starts waiting; a new place does not make one.
func Queue(st v1alpha1.AgentRunStatus, reason, message string, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	if s.Phase != v1alpha1.PhaseQueued {
		d.event(EventNormal, EventQueued, "%s", message)
	}
	s.Phase = v1alpha1.PhaseQueued
	setCondition(s, now, v1alpha1.ConditionProgressing, metav1.ConditionTrue, reason, message)
	setCondition(s, now, v1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, message)
	setCondition(s, now, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	return d
}

// QueuedFor is why a Queued run waits, as its status says.
func QueuedFor(st *v1alpha1.AgentRunStatus) (reason, message string) {
	if st.Phase != v1alpha1.PhaseQueued {
		return "", ""
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing); c != nil {
		return c.Reason, c.Message
	}
	return "", ""
}

// Evict ends a run that Kueue admitted when Kueue takes the admission back (its Workload was
// evicted, finished or deleted while the run ran): the run stops, Failed with reason Evicted,
// and says what Kueue said. Its steps so far stay in the transcript.
func Evict(st v1alpha1.AgentRunStatus, why string, now time.Time) Update {
	return Fail(st, v1alpha1.ReasonEvicted, "Kueue took back the run's admission: "+why, now)
}
