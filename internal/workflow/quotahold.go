package workflow

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A started run whose next model call would pass a cost or token cap of its namespace waits
// Running, its call not made (QuotaHold): status.quotaHold names the quota and since when, and
// its Progressing condition says QuotaExceeded. The time held counts as waiting, as a gate's
// does: the run has no deadline while held, and the time moves it back once the run goes on.

// EventQuotaExceeded is the Event of a run held at a cap, and the Progressing reason.
const EventQuotaExceeded = v1alpha1.ReasonQuotaExceeded

// HoldAtQuota holds a running run at its namespace's cap: its step stopped before a call that
// would pass it, and goes on from its transcript once there is room. A run held again at the
// same quota's cap, after it found room and lost it, stays held as it was: no new Event, no new
// status to write.
func HoldAtQuota(st v1alpha1.AgentRunStatus, h *QuotaHold, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	if s.Phase != v1alpha1.PhaseRunning {
		return d
	}
	quota := h.Quota
	if quota == "" {
		quota = "(unnamed)"
	}
	var until *metav1.Time
	if !h.Until.IsZero() {
		t := metav1.NewTime(h.Until)
		until = &t
	}
	if s.QuotaHold != nil && s.QuotaHold.Quota == quota {
		s.QuotaHold.Until = until
		return d
	}
	s.QuotaHold = &v1alpha1.QuotaHold{Quota: quota, Since: metav1.NewMicroTime(now), Until: until}
	msg := statusText(fmt.Sprintf("step %d of agent %s waits: %s", s.StepCount+1, s.CurrentAgent, h.Message), maxValue)
	setCondition(s, now, v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonQuotaExceeded, msg)
	d.Events = append(d.Events, Event{Type: EventWarning, Reason: EventQuotaExceeded, Message: msg})
	return d
}

// ReleaseQuota lets a run held at a cap go on: the time it was held counts as waiting.
func ReleaseQuota(st v1alpha1.AgentRunStatus, now time.Time) Update {
	d := Update{Status: *st.DeepCopy()}
	s := &d.Status
	if s.QuotaHold == nil {
		return d
	}
	s.Waited = addWait(s.Waited, now.Sub(s.QuotaHold.Since.Time))
	s.QuotaHold = nil
	progress(s, now, v1alpha1.PhaseRunning, runningMessage)
	return d
}
