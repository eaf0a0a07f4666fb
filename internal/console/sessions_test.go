package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func ticket() *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "ticket-1", Namespace: "review",
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "helpdesk"}}}
	s.Status = v1alpha1.AgentSessionStatus{Phase: v1alpha1.SessionActive, Turns: 3, TokensUsed: 540, Cost: "0.0123"}
	return s
}

// turnOf is turn n of ticket-1, asked by who.
func turnOf(n int, who, input string, st v1alpha1.AgentRunStatus) *v1alpha1.AgentRun {
	name := "ticket-1-t" + string(rune('0'+n))
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "review", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Now().Add(time.Duration(-10+n) * time.Minute)),
		Labels:            map[string]string{v1alpha1.LabelSession: "ticket-1"},
		Annotations:       map[string]string{v1alpha1.AnnotationCreatedBy: who, v1alpha1.AnnotationTurn: string(rune('0' + n))}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "helpdesk"}, Input: input, Session: &v1alpha1.SessionReference{Name: "ticket-1"}}}
	run.Status = st
	return run
}

// A session's page is its conversation, oldest turn first: who asked what, the team's answer,
// and a turn waiting at a gate says so with a way to decide it.
func TestASessionIsShownAsOneConversation(t *testing.T) {
	s, _ := newConsole(t, true, ticket(),
		turnOf(2, "bob", "And to Lyon?", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval, TokensUsed: 40,
			PendingApproval: &v1alpha1.PendingApproval{Gate: "refund"}}),
		turnOf(1, "alice", "Can ORD-7 ship today?", v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TokensUsed: 500,
			Output: "It ships today from Berlin.", TerminationReason: v1alpha1.ReasonCompleted}),
	)
	code, body := get(t, s, "/sessions/review/ticket-1")
	if code != http.StatusOK {
		t.Fatalf("session page: %d\n%s", code, body)
	}
	order := []string{"ticket-1-t1", "alice", "Can ORD-7 ship today?", "It ships today from Berlin.",
		"ticket-1-t2", "bob", "And to Lyon?", "Waits at gate <strong>refund</strong>", `href="/runs/review/ticket-1-t2"`}
	at := 0
	for _, want := range order {
		i := strings.Index(body[at:], want)
		if i < 0 {
			t.Fatalf("the session page lacks %q after what came before it:\n%s", want, body)
		}
		at += i
	}
	_, body = get(t, s, "/sessions")
	if !strings.Contains(body, `href="/sessions/review/ticket-1"`) {
		t.Errorf("the sessions page does not list ticket-1:\n%s", body)
	}
	_, body = get(t, s, "/runs/review/ticket-1-t2")
	if !strings.Contains(body, `<a href="/sessions/review/ticket-1">ticket-1</a> (turn 2)`) {
		t.Errorf("a turn's page does not name its session")
	}
}

// Who may not get the session sees none of its turns, whatever they may read of runs.
func TestASessionIsHiddenFromWhoeverMayNotGetIt(t *testing.T) {
	listed := false
	funcs := interceptAccess(true)
	funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*v1alpha1.AgentSession); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "agentsessions"}, key.Name, nil)
		}
		return c.Get(ctx, key, obj, opts...)
	}
	funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*v1alpha1.AgentRunList); ok {
			listed = true
		}
		return c.List(ctx, list, opts...)
	}
	s, _ := newConsoleWith(t, funcs, ticket(), turnOf(1, "alice", "Can ORD-7 ship today?",
		v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, Output: "It ships today from Berlin."}))
	code, body := get(t, s, "/sessions/review/ticket-1")
	if code != http.StatusForbidden || strings.Contains(body, "ORD-7") || listed {
		t.Fatalf("a user who may not get the session got %d, turns listed %v:\n%s", code, listed, body)
	}
}
