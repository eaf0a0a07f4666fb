package a2aserver

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func runIn(phase v1alpha1.RunPhase, mod func(*v1alpha1.AgentRunStatus)) *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "support-a2a-1", Namespace: "ops",
		Annotations: map[string]string{v1alpha1.AnnotationA2AContext: "ctx-1"}}}
	run.Status.Phase = phase
	if mod != nil {
		mod(&run.Status)
	}
	return run
}

func TestATasksStateFollowsItsRunsPhase(t *testing.T) {
	cases := map[string]struct {
		run   *v1alpha1.AgentRun
		state a2a.TaskState
		says  string
	}{
		"not started": {runIn("", nil), a2a.TaskStateSubmitted, ""},
		"queued": {runIn(v1alpha1.PhaseQueued, func(s *v1alpha1.AgentRunStatus) {
			s.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Message: "waits for a place in quota team-a"}}
		}), a2a.TaskStateSubmitted, "waits for a place in quota team-a"},
		"running": {runIn(v1alpha1.PhaseRunning, nil), a2a.TaskStateWorking, ""},
		"asking": {runIn(v1alpha1.PhaseAwaitingInput, func(s *v1alpha1.AgentRunStatus) {
			s.PendingInput = &v1alpha1.PendingInput{Agent: "support", Question: "Which cluster?"}
		}), a2a.TaskStateInputRequired, "Which cluster?"},
		"at a gate": {runIn(v1alpha1.PhaseAwaitingApproval, func(s *v1alpha1.AgentRunStatus) {
			s.PendingApproval = &v1alpha1.PendingApproval{Gate: "review"}
		}), a2a.TaskStateInputRequired, "the run waits at gate review for an approver's decision: kubectl baton approve support-a2a-1 review -n ops"},
		"succeeded": {runIn(v1alpha1.PhaseSucceeded, nil), a2a.TaskStateCompleted, ""},
		"failed": {runIn(v1alpha1.PhaseFailed, func(s *v1alpha1.AgentRunStatus) {
			s.TerminationReason, s.TerminationMessage = v1alpha1.ReasonMaxHandoffsExceeded, "handoff 3 of 3"
		}), a2a.TaskStateFailed, "MaxHandoffsExceeded: handoff 3 of 3"},
		"cancelled": {runIn(v1alpha1.PhaseCancelled, func(s *v1alpha1.AgentRunStatus) { s.TerminationMessage = "cancelled through A2A by bob" }),
			a2a.TaskStateCanceled, "cancelled through A2A by bob"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			task := TaskOf(c.run)
			if task.ID != "support-a2a-1" || task.ContextID != "ctx-1" || task.Status.State != c.state {
				t.Fatalf("task %s in %s, state %s; want state %s", task.ID, task.ContextID, task.Status.State, c.state)
			}
			said := ""
			if m := task.Status.Message; m != nil {
				said = m.Parts[0].Text()
			}
			if !strings.HasPrefix(said, c.says) || (c.says == "") != (said == "") {
				t.Errorf("says %q, want %q", said, c.says)
			}
		})
	}
}

func TestASucceededRunsOutputIsItsTasksArtifact(t *testing.T) {
	task := TaskOf(runIn(v1alpha1.PhaseSucceeded, func(s *v1alpha1.AgentRunStatus) {
		s.Output, s.StepCount, s.TokensUsed, s.Cost, s.Currency = "restarted prod-east", 2, 120, "0.0042", "USD"
	}))
	if len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "restarted prod-east" {
		t.Fatalf("artifacts %+v", task.Artifacts)
	}
	info := task.Metadata["baton"].(map[string]any)
	if info["steps"] != int32(2) || info["tokens"] != int64(120) || info["cost"] != "0.0042" || info["run"] != "support-a2a-1" {
		t.Errorf("metadata %v", info)
	}
}

func TestACardNamesTheTeamItsAgentsAndBothProtocolVersions(t *testing.T) {
	cfg := &v1alpha1.AgentConfig{ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: "ops", Generation: 3},
		Spec: v1alpha1.AgentConfigSpec{Entrypoint: "triage", Agents: []v1alpha1.Agent{
			{Name: "triage", Description: "sorts tickets"}, {Name: "fixer", Description: "fixes"}}}}
	card := CardOf(cfg, "https://baton.example/namespaces/ops/agentconfigs/support", DefaultTokenAudience)
	if card.Name != "support" || card.Description != "sorts tickets" || card.Version != "generation-3" || len(card.Skills) != 2 {
		t.Errorf("card %+v", card)
	}
	urls := map[string]string{}
	for _, i := range card.SupportedInterfaces {
		urls[string(i.ProtocolVersion)] = i.URL
	}
	if urls["1.0"] != "https://baton.example/namespaces/ops/agentconfigs/support/a2a" || urls["0.3"] != "https://baton.example/namespaces/ops/agentconfigs/support/a2a/v0.3" {
		t.Errorf("interfaces %v", urls)
	}
	if d := card.SecuritySchemes[bearer].(a2a.HTTPAuthSecurityScheme).Description; !strings.Contains(d, "--audience agents.baton.dev") {
		t.Errorf("the card does not say how to get a token: %q", d)
	}
	cfg.Spec.A2A = &v1alpha1.A2AServing{Expose: true, Description: "Restarts clusters"}
	if d := CardOf(cfg, "", DefaultTokenAudience).Description; d != "Restarts clusters" {
		t.Errorf("description %q", d)
	}
}

func TestATaskIsNamedByItsSenderAndMessage(t *testing.T) {
	a, b := taskDigest("ops", "support", "alice", "m-1"), taskDigest("ops", "support", "bob", "m-1")
	if a == b || a != taskDigest("ops", "support", "alice", "m-1") {
		t.Errorf("digests %s %s", a, b)
	}
	long := strings.Repeat("x", 60)
	if n := taskName(long, a); len(n) > 63 || !strings.HasSuffix(n, a[:12]) {
		t.Errorf("name %q (%d)", n, len(n))
	}
	if n := taskName("team-.", a); strings.Contains(n, ".-") || strings.Contains(n, "--a2a") {
		t.Errorf("name %q", n)
	}
}

func TestAMessagesPartsAreTheRunsInput(t *testing.T) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("restart"), a2a.NewDataPart(map[string]any{"cluster": "prod"}))
	in, err := inputOf(msg)
	if err != nil || in != "restart\n{\"cluster\":\"prod\"}" {
		t.Errorf("input %q, %v", in, err)
	}
	if _, err := inputOf(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewFileURLPart("https://x/y.pdf", "application/pdf"))); err == nil {
		t.Error("a file part was taken")
	}
	if _, err := inputOf(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", maxInput+1)))); err == nil {
		t.Error("an input longer than spec.input takes was taken")
	}
}
