package kueue

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/internal/textbound"
)

// MaxMessage bounds the messages Admission returns and Finished writes, in bytes as the API
// server stores them, so that a run's condition can quote one with room to spare.
const MaxMessage = 512

// Admission reads what Kueue decided about a run's Workload:
//
//   - admitted: the Workload is Admitted (quota reserved and every admission check ready) and
//     neither evicted nor finished: the run may run.
//   - evicted: Kueue took the admission back (Evicted: preempted, deactivated, its queue
//     stopped...), or the Workload is Finished or being deleted: the run must stop. An evicted
//     Workload stays Admitted until its quota is given back, so evicted wins over admitted.
//   - message: why, from the deciding condition (Kueue's own words, which say what quota is
//     short while the Workload waits), bounded by MaxMessage.
//
// A Workload that is neither is waiting in its queue. A nil Workload (not made yet) is waiting
// too, with no message.
func Admission(wl *kueue.Workload) (admitted, evicted bool, message string) {
	if wl == nil {
		return false, false, ""
	}
	conds := wl.Status.Conditions
	if c := apimeta.FindStatusCondition(conds, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		return false, true, said("Workload finished", c)
	}
	if c := apimeta.FindStatusCondition(conds, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		return false, true, said("Workload evicted", c)
	}
	if wl.DeletionTimestamp != nil {
		return false, true, "Workload deleted"
	}
	if apimeta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) {
		if wl.Status.Admission != nil {
			return true, false, bound("admitted by ClusterQueue " + string(wl.Status.Admission.ClusterQueue))
		}
		return true, false, "admitted"
	}
	// Waiting: before quota is reserved, QuotaReserved says what is short (or that the
	// LocalQueue does not exist); after, Admitted says which admission checks are pending.
	waiting := kueue.WorkloadQuotaReserved
	if apimeta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved) {
		waiting = kueue.WorkloadAdmitted
	}
	if c := apimeta.FindStatusCondition(conds, waiting); c != nil && c.Message != "" {
		return false, false, bound(c.Message)
	}
	return false, false, bound("waiting in LocalQueue " + string(wl.Spec.QueueName))
}

// Finished sets the Workload's Finished condition, which is what Kueue's own integrations do
// when their job ends: Kueue then counts none of the Workload's quota, and admits the next
// Workload that fits. reason is the run's terminal phase (Succeeded, Failed, Cancelled: Kueue's
// own integrations say Succeeded or Failed), message why it ended. It returns whether the
// Workload changed: a Workload already finished keeps its first reason, and then it is not
// written again. An empty reason is "Finished", as the API refuses a condition without one.
func Finished(wl *kueue.Workload, reason, message string, now time.Time) bool {
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return false
	}
	if reason == "" {
		reason = kueue.WorkloadFinished
	}
	return apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type:               kueue.WorkloadFinished,
		Status:             metav1.ConditionTrue,
		Reason:             reason,
		Message:            bound(message),
		ObservedGeneration: wl.Generation,
		LastTransitionTime: metav1.NewTime(now),
	})
}

// said is what a condition says, after what it means for the run.
func said(what string, c *metav1.Condition) string {
	s := what + " (" + c.Reason + ")"
	if c.Message != "" {
		s += ": " + c.Message
	}
	return bound(s)
}

func bound(s string) string { return textbound.Status(s, MaxMessage) }
