package a2aserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// sendIn sends a message that returns at once, in contextID ("" for none).
func sendIn(t *testing.T, tm *team, id, contextID, text string) (*a2a.Task, error) {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.ID, msg.ContextID = id, contextID
	res, err := tm.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return nil, err
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("the send answered %T, want a task", res)
	}
	return task, nil
}

// runOf is the run a task is.
func runOf(t *testing.T, c client.Client, task *a2a.Task) *v1alpha1.AgentRun {
	t.Helper()
	run := &v1alpha1.AgentRun{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ops", Name: string(task.ID)}, run); err != nil {
		t.Fatal(err)
	}
	return run
}

// A context is a session of its sender's: the first message opens it, the next in the same
// context is a turn of the same session, and another sender's message in that context is
// refused. A message without a context opens a session of a new one.
func TestAnA2AContextIsItsSendersSession(t *testing.T) {
	g := grantsOf("alice get agentconfigs", "alice create agentruns", "bob get agentconfigs", "bob create agentruns")
	h, c := handlerWith(t, g, exposedTeam())
	alice, bob := as(h, "alice"), as(h, "bob")

	first, err := sendIn(t, alice, "m1", "ctx-1", "Can ORD-7 ship today?")
	if err != nil {
		t.Fatal(err)
	}
	second, err := sendIn(t, alice, "m2", "ctx-1", "And to Lyon?")
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := runOf(t, c, first), runOf(t, c, second)
	if r1.Spec.Session == nil || r2.Spec.Session == nil || r1.Spec.Session.Name != r2.Spec.Session.Name || second.ContextID != "ctx-1" {
		t.Fatalf("the two messages of one context are turns of sessions %+v and %+v", r1.Spec.Session, r2.Spec.Session)
	}
	s := &v1alpha1.AgentSession{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ops", Name: r1.Spec.Session.Name}, s); err != nil {
		t.Fatalf("the context's session: %v", err)
	}
	if s.Spec.ConfigRef.Name != exposedTeam().Name || s.Annotations[v1alpha1.AnnotationCreatedBy] != "alice" ||
		s.Annotations[v1alpha1.AnnotationA2AContext] != "ctx-1" || s.Spec.TTLSecondsAfterIdle == nil || *s.Spec.TTLSecondsAfterIdle != DefaultSessionTTL {
		t.Errorf("the context's session %+v %+v", s.ObjectMeta, s.Spec)
	}

	_, err = sendIn(t, bob, "m3", "ctx-1", "What did alice ask?")
	if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "context ctx-1 belongs to another sender") {
		t.Fatalf("bob's message in alice's context: %v, want it refused", err)
	}
	runs := &v1alpha1.AgentRunList{}
	if err := c.List(context.Background(), runs); err != nil || len(runs.Items) != 2 {
		t.Fatalf("%d runs after bob's refused message (%v), want alice's 2", len(runs.Items), err)
	}

	fresh, err := sendIn(t, bob, "m4", "", "Hello")
	if err != nil {
		t.Fatal(err)
	}
	if r := runOf(t, c, fresh); fresh.ContextID == "" || r.Spec.Session == nil || r.Spec.Session.Name == r1.Spec.Session.Name {
		t.Errorf("a message without a context: context %q, session %+v", fresh.ContextID, r.Spec.Session)
	}
}
