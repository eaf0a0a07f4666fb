package main

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func TestDescribeASessionListsItsTurnsInOrder(t *testing.T) {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "ticket", Namespace: "team-a"},
		Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "helpdesk"},
			Limits: &v1alpha1.SessionLimits{MaxTurns: ptr.To[int32](20), MaxCost: ptr.To("1.00")}},
		Status: v1alpha1.AgentSessionStatus{Phase: v1alpha1.SessionIdle, Turns: 2, TokensUsed: 300, Cost: "0.02", State: "CONFIRM",
			Taint: &v1alpha1.Taint{Source: "turn ticket-t2: tool web/fetch"}}}
	turn := func(name, n, input string, phase v1alpha1.RunPhase, reason v1alpha1.TerminationReason, created time.Duration) v1alpha1.AgentRun {
		return v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(0, 0).Add(created)),
			Annotations: map[string]string{v1alpha1.AnnotationTurn: n, v1alpha1.AnnotationCreatedBy: "alice"}},
			Spec:   v1alpha1.AgentRunSpec{Input: input},
			Status: v1alpha1.AgentRunStatus{Phase: phase, TerminationReason: reason, TokensUsed: 150, Output: "answer to " + input}}
	}
	var b bytes.Buffer
	describeSession(&b, s, []v1alpha1.AgentRun{
		turn("ticket-t10", "10", "and then?", v1alpha1.PhaseSucceeded, v1alpha1.ReasonCompleted, 2*time.Second),
		turn("ticket-t2", "2", "why?", v1alpha1.PhaseSucceeded, v1alpha1.ReasonCompleted, time.Second),
	})
	want := `Session:      team-a/ticket
Config:       helpdesk
Phase:        Idle
Next state:   CONFIRM
Counts:       2 turns, 300 tokens, cost 0.02
Tainted:      by turn ticket-t2: tool web/fetch: every later turn starts tainted
Limits:       20 turns, cost 1.00
Turns:
  TURN  RUN         PHASE      REASON     TOKENS  ASKED BY  INPUT
  2     ticket-t2   Succeeded  Completed  150     alice     why?
  10    ticket-t10  Succeeded  Completed  150     alice     and then?
Last answer (ticket-t10):
  answer to and then?
`
	if b.String() != want {
		t.Errorf("describe printed:\n%s\nwant:\n%s", b.String(), want)
	}
}
