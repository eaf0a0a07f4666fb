package runview

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestReachingSaysTheRemindersAndTheEscalation(t *testing.T) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.Local)
	g := &v1alpha1.ApprovalGate{Name: "refund", Remind: &v1alpha1.GateReminder{Every: "30m"},
		Escalate: &v1alpha1.GateEscalation{After: "2h", To: v1alpha1.Deciders{Groups: []string{"oncall-leads"}}}}
	got := strings.Join(Reaching(g, since, since.Add(95*time.Minute)), "; ")
	want := "reminders every 30m0s: 3 so far, the next at 14:00:00; escalates at 14:00:00, to groups oncall-leads (who may decide with the approve verb)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := Reaching(g, since, since.Add(3*time.Hour)); !strings.HasPrefix(got[1], "escalated at 14:00:00") {
		t.Errorf("after escalation: %q", got)
	}
	if got := Reaching(&v1alpha1.ApprovalGate{Name: "plain"}, since, since); len(got) != 0 {
		t.Errorf("a gate with neither: %q", got)
	}
}
