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

// A tool's gate and its taint gate have the quorum and timeout of the agent's tools entry, as
// the operator sets them up; a taint gate's timeout rejects whatever the entry says.
func TestGateSpecFindsToolAndTaintGates(t *testing.T) {
	cfg := &v1alpha1.AgentConfig{Spec: v1alpha1.AgentConfigSpec{
		Approvals: []v1alpha1.ApprovalGate{{Name: "plan", Required: 2}},
		Agents: []v1alpha1.Agent{
			{Name: "clerk", Tools: []v1alpha1.AgentTools{{Server: "refund", SideEffects: true,
				Gate: &v1alpha1.ToolGate{Required: 3, Timeout: v1alpha1.NewDuration(time.Hour), OnTimeout: "Approve"}}}},
			{Name: "other", Tools: []v1alpha1.AgentTools{{Server: "refund"}}},
		}}}
	for _, tc := range []struct {
		agent, name         string
		required            int32
		onTimeout, notFound string
	}{
		{agent: "clerk", name: "plan", required: 2},
		{agent: "clerk", name: "tool/refund/refund", required: 3, onTimeout: "Approve"},
		{agent: "clerk", name: "taint/refund/refund", required: 3, onTimeout: "Reject"},
		{agent: "other", name: "taint/refund/refund", required: 1, onTimeout: "Reject"},
		{agent: "clerk", name: "tool/elsewhere/x", notFound: "a server the agent has no tools of"},
		{agent: "clerk", name: "review", notFound: "a gate the config does not have"},
	} {
		g := GateSpec(cfg, tc.agent, tc.name)
		switch {
		case tc.notFound != "" && g != nil:
			t.Errorf("%s of %s, %s: got %+v", tc.name, tc.agent, tc.notFound, g)
		case tc.notFound != "":
		case g == nil || g.Required != tc.required || g.OnTimeout != tc.onTimeout:
			t.Errorf("%s of %s: got %+v; want %d approvers, onTimeout %q", tc.name, tc.agent, g, tc.required, tc.onTimeout)
		}
	}
}
