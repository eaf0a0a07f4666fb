package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
)

// team plays the operator for kubectl baton chat's tests: what a turn does once it is created
// or replied to, as status and records.
type team struct {
	mu   sync.Mutex
	recs map[string][]records.Record
	seq  int64
	// served counts the records read.
	served int
}

func (tm *team) step(name, agent, output string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.seq++
	body, _ := json.Marshal(records.StepBody{Agent: agent, Result: workflow.Result{Output: output}})
	tm.recs[name] = append(tm.recs[name], records.Record{Seq: tm.seq, Kind: "step", Step: int32(len(tm.recs[name]) + 1),
		Time: time.Date(2026, 11, 28, 11, 0, 0, 0, time.UTC), Body: body})
}

// records serves a turn's records after the one numbered after, as the transcript API does,
// and counts how many it served.
func (tm *team) records(_ context.Context, name string, after int64) ([]records.Record, error) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var out []records.Record
	for _, r := range tm.recs[name] {
		if r.Seq > after {
			out = append(out, r)
		}
	}
	tm.served += len(out)
	return out, nil
}

func chatOn(t *testing.T, tm *team, objs ...client.Object) (*chat, client.Client, *bytes.Buffer) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// A turn asks which warehouse when it is created with a question, and answers once replied
	// to; any other turn answers at once.
	setStatus := func(ctx context.Context, c client.WithWatch, name string, st v1alpha1.AgentRunStatus) error {
		run := &v1alpha1.AgentRun{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, run); err != nil {
			return err
		}
		run.Status = st
		return c.Status().Update(ctx, run)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.AgentRun{}, &v1alpha1.AgentSession{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := c.Create(ctx, obj, opts...); err != nil {
					return err
				}
				run, ok := obj.(*v1alpha1.AgentRun)
				if !ok {
					return nil
				}
				if strings.HasSuffix(run.Spec.Input, "?") {
					tm.step(run.Name, "desk", "checking stock")
					return setStatus(ctx, c, run.Name, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingInput,
						PendingInput: &v1alpha1.PendingInput{Agent: "desk", Question: "Which warehouse: berlin or lyon?"}})
				}
				tm.step(run.Name, "desk", "You are welcome.")
				return setStatus(ctx, c, run.Name, v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TerminationReason: v1alpha1.ReasonCompleted})
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := c.Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				reply := obj.GetAnnotations()[v1alpha1.AnnotationReply]
				tm.step(obj.GetName(), "desk", "It ships today from "+reply+".")
				return setStatus(ctx, c, obj.GetName(), v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseSucceeded, TerminationReason: v1alpha1.ReasonCompleted})
			},
		}).Build()
	var out bytes.Buffer
	return &chat{kube: c, ns: "team-a", session: "ticket", records: tm.records, out: &out, poll: time.Millisecond}, c, &out
}

func ticket(numbered int32) *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "ticket", Namespace: "team-a"},
		Spec: v1alpha1.AgentSessionSpec{ConfigRef: v1alpha1.ConfigReference{Name: "order-desk"}}}
	s.Status.Numbered = numbered
	return s
}

// Each line is a turn; while a turn asks, the next line is its reply; every step prints once.
func TestChatSendsTurnsAndReplies(t *testing.T) {
	tm := &team{recs: map[string][]records.Record{}}
	ch, c, out := chatOn(t, tm, ticket(0))
	if err := ch.open(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if err := ch.run(context.Background(), strings.NewReader("Can ORD-7 ship today?\n\nberlin\nthanks\n")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"agentrun.agents.baton.dev/ticket-t1 created\n",
		"desk asks: Which warehouse: berlin or lyon?\n",
		"turn ticket-t1 ended Succeeded (Completed)\n  It ships today from berlin.\n",
		"agentrun.agents.baton.dev/ticket-t2 created\n",
		"turn ticket-t2 ended Succeeded (Completed)\n  You are welcome.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("chat printed:\n%s\nwant it to print %q", out, want)
		}
	}
	if n := strings.Count(out.String(), "checking stock"); n != 1 {
		t.Errorf("the first step printed %d times:\n%s", n, out)
	}
	if total := len(tm.recs["ticket-t1"]) + len(tm.recs["ticket-t2"]); tm.served != total {
		t.Errorf("chat read %d records of the %d written: each look reads only what is new", tm.served, total)
	}
	first := &v1alpha1.AgentRun{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "ticket-t1"}, first); err != nil {
		t.Fatal(err)
	}
	if first.Annotations[v1alpha1.AnnotationReply] != "berlin" || first.Spec.Session.Name != "ticket" {
		t.Errorf("the first turn: reply %q, session %+v", first.Annotations[v1alpha1.AnnotationReply], first.Spec.Session)
	}
}

func TestChatOpensASessionOrSaysWhyNot(t *testing.T) {
	for name, tc := range map[string]struct {
		objs   []client.Object
		config string
		err    string
	}{
		"a session that does not exist":       {err: "AgentSession ticket does not exist in namespace team-a: start it with --new CONFIG"},
		"--new of a session that exists":      {objs: []client.Object{ticket(0)}, config: "order-desk", err: "AgentSession ticket exists already: leave out --new to go on with it"},
		"--new starts it on the config named": {config: "order-desk"},
	} {
		t.Run(name, func(t *testing.T) {
			ch, c, _ := chatOn(t, &team{recs: map[string][]records.Record{}}, tc.objs...)
			err := ch.open(context.Background(), tc.config)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.err {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if tc.err == "" {
				s := &v1alpha1.AgentSession{}
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "ticket"}, s); err != nil || s.Spec.ConfigRef.Name != "order-desk" {
					t.Errorf("session %+v, %v", s.Spec, err)
				}
			}
		})
	}
}

// A turn's name taken by another run is passed over.
func TestChatPassesOverATakenName(t *testing.T) {
	taken := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "ticket-t3", Namespace: "team-a"}}
	ch, _, out := chatOn(t, &team{recs: map[string][]records.Record{}}, ticket(2), taken)
	if err := ch.run(context.Background(), strings.NewReader("thanks\n")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "agentrun.agents.baton.dev/ticket-t4 created") {
		t.Errorf("chat printed:\n%s", out)
	}
}
