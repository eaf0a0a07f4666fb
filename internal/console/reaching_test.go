package console

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A gate's page says how it reaches people: its reminders and escalation, from its spec.
func TestAGatesPageSaysItsRemindersAndEscalation(t *testing.T) {
	cfg := pipeline()
	cfg.Spec.Approvals[0].Remind = &v1alpha1.GateReminder{Every: "30m"}
	cfg.Spec.Approvals[0].Escalate = &v1alpha1.GateEscalation{After: "2h", To: v1alpha1.Deciders{Groups: []string{"oncall-leads"}}}
	s, _ := newConsole(t, true, cfg, waitingRun(time.Now()))
	_, body := get(t, s, "/runs/review/vendor-review")
	for _, want := range []string{"reminders every 30m0s: 0 so far", "escalates at", "to groups oncall-leads"} {
		if !strings.Contains(body, want) {
			t.Errorf("the gate's page lacks %q", want)
		}
	}
}
