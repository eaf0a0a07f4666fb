package a2aserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcriptapi"
)

// grants is an Auth whose permissions, and whose callers' credentials, a test takes away
// while calls are open.
type grants struct {
	mu    sync.Mutex
	rbac  rbac
	stale map[string]bool // callers whose credentials no longer authenticate
	// authentications counts the requests' credentials checked.
	authentications atomic.Int32
}

func grantsOf(allowed ...string) *grants {
	g := &grants{rbac: rbac{}, stale: map[string]bool{}}
	for _, a := range allowed {
		g.rbac[a] = true
	}
	return g
}

func (g *grants) Authenticate(r *http.Request) (user.Info, int, string) {
	g.authentications.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stale[r.Header.Get("X-User")] {
		return nil, http.StatusUnauthorized, "Unauthorized"
	}
	return g.rbac.Authenticate(r)
}

func (g *grants) Allowed(ctx context.Context, u user.Info, access transcriptapi.Access) (int, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rbac.Allowed(ctx, u, access)
}

func (g *grants) change(f func(rbac, map[string]bool)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g.rbac, g.stale)
}

// workingTask is a task of alice's whose run works on and on.
func workingTask() *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "support-a2a-0123456789ab", Namespace: "ops",
		Labels: map[string]string{v1alpha1.LabelA2ATask: "d"}, Annotations: map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "support"}}}
	run.Status.Phase = v1alpha1.PhaseRunning
	return run
}

// as is the team as who calls it, with the request their calls came in.
func as(h *Handler, who string) *team {
	req := httptest.NewRequest(http.MethodPost, "/namespaces/ops/agentconfigs/support/a2a", nil)
	req.Header.Set("X-User", who)
	return &team{h: h, cfg: exposedTeam(), caller: &user.DefaultInfo{Name: who}, req: req}
}

// call is a call that follows a task: started is closed at its first event, ended gets what
// it ended with (nil when the task settled).
type call struct {
	started chan struct{}
	ended   chan error
}

func follow(events func(func(a2a.Event, error) bool)) call {
	c := call{started: make(chan struct{}), ended: make(chan error, 1)}
	go func() {
		// The end is reported once the range statement is done: by then the call has returned
		// and given back whatever it held.
		var end error
		first := true
		for _, err := range events {
			if err != nil {
				end = err
				break
			}
			if first {
				close(c.started)
				first = false
			}
		}
		c.ended <- end
	}()
	return c
}

// result is what a call that ends at once ended with.
func (c call) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.ended:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end within 10s")
		return nil
	}
}

func (c call) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.started:
	case err := <-c.ended:
		t.Fatalf("the call ended before its first event: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no first event within 10s")
	}
}

// endAsTimePasses moves the handler's clock on by d, again and again, until the call ends, and
// says what it ended with. (A call's first event comes before it starts following the task:
// one step could come before its start.)
func (c call) endAsTimePasses(t *testing.T, h *Handler, d time.Duration) error {
	t.Helper()
	clk := h.Clock.(*clocktesting.FakePassiveClock)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		clk.SetTime(clk.Now().Add(d))
		select {
		case err := <-c.ended:
			return err
		case <-deadline:
			t.Fatal("the call did not end within 10s")
		case <-tick.C:
		}
	}
}

func (h *Handler) streamsOf(caller string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams[caller]
}

// A call that follows a task ends at the stream lifetime and gives its place back: a stream
// or a subscription with an error that says to subscribe again, a send that waits with the
// task as it is then.
func TestACallThatFollowsATaskEndsAtTheStreamLifetime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	send := func() *a2a.SendMessageRequest {
		return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("restart prod"))}
	}
	for name, open := range map[string]func(tm *team) func(func(a2a.Event, error) bool){
		"a subscription": func(tm *team) func(func(a2a.Event, error) bool) {
			return tm.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(workingTask().Name)})
		},
		"a streaming send": func(tm *team) func(func(a2a.Event, error) bool) { return tm.SendStreamingMessage(ctx, send()) },
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := handlerWith(t, grantsOf("alice get agentconfigs", "alice create agentruns"), exposedTeam(), workingTask())
			h.StreamLifetime = time.Hour
			c := follow(open(as(h, "alice")))
			c.wait(t)
			err := c.endAsTimePasses(t, h, time.Hour)
			if !errors.Is(err, a2a.ErrServerError) || !strings.Contains(err.Error(), "subscribe to it again") {
				t.Fatalf("at its lifetime the call ended with %v", err)
			}
			if n := h.streamsOf("alice"); n != 0 {
				t.Errorf("alice still holds %d places", n)
			}
		})
	}
	t.Run("a send that waits", func(t *testing.T) {
		h, _ := handlerWith(t, grantsOf("alice get agentconfigs", "alice create agentruns"), exposedTeam())
		var task *a2a.Task
		c := call{ended: make(chan error, 1)}
		go func() {
			res, err := as(h, "alice").SendMessage(ctx, send())
			task, _ = res.(*a2a.Task)
			c.ended <- err
		}()
		if err := c.endAsTimePasses(t, h, DefaultStreamLifetime); err != nil {
			t.Fatalf("a send that waited its lifetime: %v", err)
		}
		if task == nil || task.Status.State != a2a.TaskStateSubmitted {
			t.Fatalf("a send that waited its lifetime answered %v, want the task as it is", task)
		}
		if n := h.streamsOf("alice"); n != 0 {
			t.Errorf("alice still holds %d places", n)
		}
	})
}

// While a call follows a task, the caller's access is checked again every Reauthorize: taken
// away, the call ends saying so; left as it was, the call goes on until the task settles.
func TestACallThatFollowsATaskEndsWhenItsCallersAccessIsTakenAway(t *testing.T) {
	cases := map[string]struct {
		who  string
		take func(context.Context, client.Client, rbac, map[string]bool) error
		want error
	}{
		"the caller may no longer get the AgentConfig": {who: "alice", want: a2a.ErrUnauthorized,
			take: func(_ context.Context, _ client.Client, r rbac, _ map[string]bool) error {
				delete(r, "alice get agentconfigs")
				return nil
			}},
		"the caller's credentials no longer authenticate": {who: "alice", want: a2a.ErrUnauthenticated,
			take: func(_ context.Context, _ client.Client, _ rbac, stale map[string]bool) error {
				stale["alice"] = true
				return nil
			}},
		"the team is no longer served": {who: "alice", want: a2a.ErrUnsupportedOperation,
			take: func(ctx context.Context, c client.Client, _ rbac, _ map[string]bool) error {
				cfg := exposedTeam()
				if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
					return err
				}
				cfg.Spec.A2A.Expose = false
				return c.Update(ctx, cfg)
			}},
		"a reader may no longer get the run": {who: "carol", want: a2a.ErrTaskNotFound,
			take: func(_ context.Context, _ client.Client, r rbac, _ map[string]bool) error {
				delete(r, "carol get agentruns")
				return nil
			}},
		"nothing is taken away": {who: "carol"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			g := grantsOf("alice get agentconfigs", "carol get agentconfigs", "carol get agentruns")
			h, c := handlerWith(t, g, exposedTeam(), workingTask())
			sub := follow(as(h, tc.who).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(workingTask().Name)}))
			sub.wait(t)
			if tc.take == nil {
				finishAfterRechecks(ctx, t, h, g, c)
			} else {
				var err error
				g.change(func(r rbac, stale map[string]bool) { err = tc.take(ctx, c, r, stale) })
				if err != nil {
					t.Fatal(err)
				}
			}
			err := sub.endAsTimePasses(t, h, DefaultReauthorize)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("the subscription ended with %v, want %v", err, tc.want)
			}
		})
	}
}

// finishAfterRechecks lets the handler's clock pass two reauthorizations of the open call,
// then ends the working task.
func finishAfterRechecks(ctx context.Context, t *testing.T, h *Handler, g *grants, c client.Client) {
	t.Helper()
	clk := h.Clock.(*clocktesting.FakePassiveClock)
	for deadline, before := time.Now().Add(10*time.Second), g.authentications.Load(); g.authentications.Load() < before+2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the open call was not reauthorized within 10s")
		}
		clk.SetTime(clk.Now().Add(DefaultReauthorize))
	}
	run := workingTask()
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
		t.Fatal(err)
	}
	run.Status.Phase = v1alpha1.PhaseSucceeded
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
}

// One caller follows at most MaxCallerStreams tasks at once: past it a stream, a subscription
// or a send that waits is refused before it starts anything, while the caller's short calls,
// and other callers' streams, go on; a stream that ends gives its place back.
func TestACallersStreamsAreBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := grantsOf("alice get agentconfigs", "alice create agentruns", "bob get agentconfigs", "bob get agentruns")
	h, c := handlerWith(t, g, exposedTeam(), workingTask())
	h.MaxCallerStreams = 2
	id := a2a.TaskID(workingTask().Name)
	subscribe := func(ctx context.Context, who string) call {
		return follow(as(h, who).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
	}
	first, stop := context.WithCancel(ctx)
	held := []call{subscribe(first, "alice"), subscribe(ctx, "alice")}
	for _, s := range held {
		s.wait(t)
	}

	busy := func(err error) bool {
		return errors.Is(err, a2a.ErrServerError) && strings.Contains(err.Error(), "the most one caller may")
	}
	if err := subscribe(ctx, "alice").result(t); !busy(err) {
		t.Errorf("a third subscription: %v", err)
	}
	msg := func() *a2a.Message { return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("restart prod")) }
	if err := follow(as(h, "alice").SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg()})).result(t); !busy(err) {
		t.Errorf("a third stream: %v", err)
	}
	if _, err := as(h, "alice").SendMessage(ctx, &a2a.SendMessageRequest{Message: msg()}); !busy(err) {
		t.Errorf("a send that would wait: %v", err)
	}
	runs := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, runs); err != nil || len(runs.Items) != 1 {
		t.Errorf("refused calls started runs: %d runs, %v", len(runs.Items), err)
	}
	if _, err := as(h, "alice").SendMessage(ctx, &a2a.SendMessageRequest{Message: msg(), Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		t.Errorf("a send that does not wait: %v", err)
	}
	if _, err := as(h, "alice").GetTask(ctx, &a2a.GetTaskRequest{ID: id}); err != nil {
		t.Errorf("getting the task: %v", err)
	}
	bobs := subscribe(ctx, "bob")
	bobs.wait(t)
	if n, m := h.streamsOf("bob"), h.streamsOf("alice"); n != 1 || m != 2 {
		t.Errorf("bob holds %d places and alice %d, want 1 and 2: each caller's places are counted apart", n, m)
	}

	stop()
	if err := held[0].result(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped subscription ended with %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); h.streamsOf("alice") != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("alice holds %d places after one of two streams ended", h.streamsOf("alice"))
		}
	}
	subscribe(ctx, "alice").wait(t)
}

// Served over HTTP, a stream is reauthorized with the credentials of its own request.
func TestAStreamServedOverHTTPEndsWhenItsCallerMayNoLongerGetTheTeam(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := grantsOf("carol get agentconfigs", "carol get agentruns")
	h, _ := handlerWith(t, g, exposedTeam(), workingTask())
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := srv.URL + "/namespaces/ops/agentconfigs/support"
	card := CardOf(exposedTeam(), base, DefaultTokenAudience)
	card.SupportedInterfaces = card.SupportedInterfaces[:1] // A2A 1.0
	carol := &http.Client{Transport: asUser{"carol"}}
	a2aClient, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(carol))
	if err != nil {
		t.Fatal(err)
	}
	sub := follow(a2aClient.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(workingTask().Name)}))
	sub.wait(t)
	g.change(func(r rbac, _ map[string]bool) { delete(r, "carol get agentconfigs") })
	if err := sub.endAsTimePasses(t, h, DefaultReauthorize); !errors.Is(err, a2a.ErrUnauthorized) {
		t.Fatalf("the stream ended with %v", err)
	}
}

// asUser sends requests as a user of the tests' rbac.
type asUser struct{ name string }

func (u asUser) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-User", u.name)
	return http.DefaultTransport.RoundTrip(r)
}
