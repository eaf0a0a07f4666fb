package notifier

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/notify"
)

// A call held at its taint gate is reminded of and escalated as its tool's gate says: the
// notifier finds the gate in the agent's tools entry, not among the config's own gates.
func TestATaintGateIsRemindedAndEscalatedAsItsToolsGateSays(t *testing.T) {
	cfg := &v1alpha1.AgentConfig{Spec: v1alpha1.AgentConfigSpec{
		Approvals: []v1alpha1.ApprovalGate{{Name: "plan"}},
		Agents: []v1alpha1.Agent{{Name: "clerk", Tools: []v1alpha1.AgentTools{{Server: "refund", SideEffects: true, Gate: &v1alpha1.ToolGate{
			Remind:   &v1alpha1.GateReminder{Every: "30m"},
			Escalate: &v1alpha1.GateEscalation{After: "1h", To: v1alpha1.Deciders{Groups: []string{"fraud-desk"}}}}}}}}}}
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	run := &v1alpha1.AgentRun{Status: v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval, CurrentAgent: "clerk",
		PendingApproval: &v1alpha1.PendingApproval{Gate: "taint/refund/refund", Since: metav1.NewMicroTime(since),
			ToolCall: &v1alpha1.PendingToolCall{Server: "refund", Tool: "refund", Step: 2, Call: 1, Taint: "tool web/fetch"}}}}
	run.Name, run.Namespace = "shop-1", "ns"
	n := &Notifier{Clock: clocktesting.NewFakeClock(since.Add(65 * time.Minute))}
	f := n.facts(cfg, nil, run)
	due, next := notify.Due(f)
	kinds := map[v1alpha1.NotifyEvent]bool{}
	for _, e := range due {
		kinds[e.Type] = true
	}
	if !kinds[v1alpha1.NotifyGateReminder] || !kinds[v1alpha1.NotifyGateEscalated] || !next.Equal(since.Add(90*time.Minute)) {
		t.Fatalf("due %+v, next %s; want a reminder and the escalation, the next reminder at 13:30", due, next)
	}
	if got := gatesOf(cfg, run); len(got) != 2 || len(cfg.Spec.Approvals) != 1 {
		t.Errorf("gates %+v; want the config's one and the taint gate, the config untouched", got)
	}
}
