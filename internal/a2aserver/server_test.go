package a2aserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcriptapi"
)

// rbac authenticates a caller by the X-User header, and allows what it lists as
// "user verb resource".
type rbac map[string]bool

func (a rbac) Authenticate(r *http.Request) (user.Info, int, string) {
	if u := r.Header.Get("X-User"); u != "" {
		return &user.DefaultInfo{Name: u}, http.StatusOK, ""
	}
	return nil, http.StatusUnauthorized, "Unauthorized"
}

func (a rbac) Allowed(_ context.Context, u user.Info, access transcriptapi.Access) (int, string) {
	if a[u.GetName()+" "+access.Verb+" "+access.Resource] {
		return http.StatusOK, ""
	}
	return http.StatusForbidden, u.GetName() + " cannot " + access.Verb + " " + access.Resource
}

// countingClient counts the reads a request makes.
type countingClient struct {
	client.Client
	gets atomic.Int32
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Client.Get(ctx, key, obj, opts...)
}

func exposedTeam() *v1alpha1.AgentConfig {
	cfg := &v1alpha1.AgentConfig{ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: "ops"}}
	cfg.Spec.A2A = &v1alpha1.A2AServing{Expose: true}
	return cfg
}

func handlerWith(t *testing.T, auth Auth, objs ...client.Object) (*Handler, *countingClient) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := &countingClient{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.AgentRun{}).Build()}
	return &Handler{Client: c, Reader: c, Auth: auth, Poll: time.Millisecond, Clock: clocktesting.NewFakePassiveClock(time.Now())}, c
}

// A caller who may not get the team's AgentConfig is answered before anything is read or a
// place is taken: whether a config exists, or is served, is not theirs to learn.
func TestACallerWhoMayNotGetTheConfigIsRefusedBeforeAnythingIsRead(t *testing.T) {
	h, c := handlerWith(t, rbac{"alice get agentconfigs": true}, exposedTeam())
	mux := http.NewServeMux()
	h.Register(mux)
	for _, path := range []string{"/namespaces/ops/agentconfigs/support/a2a", "/namespaces/ops/agentconfigs/nowhere/a2a",
		"/namespaces/other/agentconfigs/support/a2a/v0.3"} {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
		req.Header.Set("X-User", "mallory")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", path, rec.Code)
		}
	}
	if n := c.gets.Load(); n != 0 || h.inFlight != 0 {
		t.Errorf("refused callers made %d reads and hold %d places", n, h.inFlight)
	}
}

// The card is written without the CORS headers that would let any web page read it with a
// browser's credentials.
func TestTheCardIsNotSharedAcrossOrigins(t *testing.T) {
	h, _ := handlerWith(t, rbac{"alice get agentconfigs": true}, exposedTeam())
	mux := http.NewServeMux()
	h.Register(mux)
	for _, version := range []string{"", "1.0"} {
		req := httptest.NewRequest(http.MethodGet, "/namespaces/ops/agentconfigs/support/.well-known/agent-card.json", nil)
		req.Header.Set("X-User", "alice")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("A2A-Version", version)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"support"`) {
			t.Fatalf("card %q: %d %s", version, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "" || rec.Header().Get("Vary") != "A2A-Version" {
			t.Errorf("card %q: Access-Control-Allow-Origin %q, Vary %q", version, got, rec.Header().Get("Vary"))
		}
	}
}

// A message's task name comes from what its sender sent, which others may guess: a run made
// under it by someone else, or of another team, is never taken for the sender's task.
func TestARunInTheWayOfAMessagesTaskIsNotTakenForIt(t *testing.T) {
	cfg := exposedTeam()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("restart prod"))
	digest := taskDigest("ops", "support", "alice", msg.ID)
	planted := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: taskName("support", digest), Namespace: "ops",
		Labels:      map[string]string{v1alpha1.LabelA2ATask: digest},
		Annotations: map[string]string{v1alpha1.AnnotationCreatedBy: "mallory"}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "support"}, Input: "mallory's task"}}
	h, _ := handlerWith(t, rbac{"alice create agentruns": true}, cfg, planted)
	team := &team{h: h, cfg: cfg, caller: &user.DefaultInfo{Name: "alice"}}
	_, err := team.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err == nil || !strings.Contains(err.Error(), "is in the way") {
		t.Fatalf("a planted run: %v", err)
	}
	// Sent again by its sender, a message finds the task it started.
	planted.Annotations[v1alpha1.AnnotationCreatedBy] = "alice"
	if err := h.Client.Update(context.Background(), planted); err != nil {
		t.Fatal(err)
	}
	res, err := team.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil || string(res.(*a2a.Task).ID) != planted.Name {
		t.Fatalf("the sender's own task: %v, %v", res, err)
	}
}

// Whoever may not read a task is told it does not exist; a task of another team, or a run
// that is not a task, is not one.
func TestATaskIsHiddenFromWhoeverMayNotReadIt(t *testing.T) {
	cfg := exposedTeam()
	mine := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "support-a2a-0123456789ab", Namespace: "ops",
		Labels: map[string]string{v1alpha1.LabelA2ATask: "d"}, Annotations: map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "support"}}}
	plain := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ops"},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "support"}}}
	h, _ := handlerWith(t, rbac{"carol get agentruns": true}, cfg, mine, plain)
	as := func(who string) *team { return &team{h: h, cfg: cfg, caller: &user.DefaultInfo{Name: who}} }
	ctx := context.Background()
	if _, err := as("alice").GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(mine.Name)}); err != nil {
		t.Errorf("its sender: %v", err)
	}
	for _, tc := range []struct {
		who string
		id  string
		err error
	}{
		{"bob", mine.Name, a2a.ErrTaskNotFound},
		{"carol", "nightly", a2a.ErrTaskNotFound},
	} {
		if _, err := as(tc.who).GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(tc.id)}); !errors.Is(err, tc.err) {
			t.Errorf("%s getting %s: %v, want %v", tc.who, tc.id, err, tc.err)
		}
	}
	if _, err := as("bob").CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(mine.Name)}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob cancelling: %v", err)
	}
	// Carol may read the task, so she is told she may not cancel it.
	if _, err := as("carol").CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(mine.Name)}); !errors.Is(err, a2a.ErrUnauthorized) {
		t.Errorf("carol cancelling: %v", err)
	}
}

// A reply's first answer says the task is at work on it, not what the run said before the
// reply; a reply to a run that then ends, or a run deleted while followed, does not leave the
// request waiting.
func TestFollowingATaskEndsWhenItsRunDoes(t *testing.T) {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "support-a2a-0123456789ab", Namespace: "ops"}}
	run.Status.Phase = v1alpha1.PhaseAwaitingInput
	run.Status.PendingInput = &v1alpha1.PendingInput{Agent: "support", Question: "Which cluster?"}
	if got := (started{run: run, seq: 1}).first().Status.State; got != a2a.TaskStateWorking {
		t.Errorf("a reply's first answer is %s", got)
	}
	h, _ := handlerWith(t, rbac{}, exposedTeam(), run.DeepCopy())
	tm := &team{h: h, cfg: exposedTeam(), caller: &user.DefaultInfo{Name: "alice"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ended := &v1alpha1.AgentRun{}
	if err := h.Client.Get(ctx, client.ObjectKeyFromObject(run), ended); err != nil {
		t.Fatal(err)
	}
	ended.Status.Phase, ended.Status.PendingInput = v1alpha1.PhaseCancelled, nil
	if err := h.Client.Status().Update(ctx, ended); err != nil {
		t.Fatal(err)
	}
	for got, err := range tm.follow(ctx, started{run: run, seq: 7}) {
		if err != nil || got.Status.Phase != v1alpha1.PhaseCancelled {
			t.Fatalf("a run that ended before taking the reply: %v, %v", got, err)
		}
		break
	}
	if err := h.Client.Delete(ctx, ended); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range tm.follow(ctx, started{run: run}) {
		last = err
		if err != nil {
			break
		}
	}
	if !errors.Is(last, a2a.ErrTaskNotFound) {
		t.Errorf("following a deleted run: %v", last)
	}
}

// Push notifications are not served: a send that asks for them is refused, not quietly
// answered without them.
func TestASendAskingForPushNotificationsIsRefused(t *testing.T) {
	h, _ := handlerWith(t, rbac{"alice create agentruns": true}, exposedTeam())
	tm := &team{h: h, cfg: exposedTeam(), caller: &user.DefaultInfo{Name: "alice"}}
	req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "https://hooks.example"}}}
	if _, err := tm.SendMessage(context.Background(), req); !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Errorf("send: %v", err)
	}
}
