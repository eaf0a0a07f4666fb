package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/notify"
	"github.com/baton-dev/baton/internal/outbox"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	. "github.com/baton-dev/baton/test/builders"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// keys are the Secrets' keys the notifier reads.
type keys map[string]string

func (k keys) SecretKey(_ context.Context, _, name, key string) (string, error) {
	return k[name+"/"+key], nil
}

// receiver is a sink that checks each request's signature, answers as told, and keeps what
// it took.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	took     []notify.Event
	bad      int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if notify.Verify([]byte("s3cret"), body, req.Header.Get(notify.SignatureHeader), t0, time.Hour) != nil {
		r.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	status := http.StatusOK
	if len(r.statuses) > 0 {
		status, r.statuses = r.statuses[0], r.statuses[1:]
	}
	if status == http.StatusOK {
		var ce struct {
			ID   string       `json:"id"`
			Type string       `json:"type"`
			Data notify.Event `json:"data"`
		}
		_ = json.Unmarshal(body, &ce)
		ce.Data.ID, ce.Data.Type = ce.ID, v1alpha1.NotifyEvent(ce.Type[len(notify.TypePrefix):])
		r.took = append(r.took, ce.Data)
	}
	w.WriteHeader(status)
}

func newNotifier(t *testing.T, sink string, objs ...client.Object) (*Notifier, *clocktesting.FakeClock, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg := MakeConfig("refunds", "team-a").Agents(MakeAgent("planner").Terminator()).Gate("plan", "planner", 1).Obj()
	cfg.Spec.Notify = []v1alpha1.NotifySink{{Name: "ops", URL: sink, Format: v1alpha1.NotifyCloudEvents,
		SecretRef: &v1alpha1.SecretKeyRef{Name: "hook", Key: "signingKey"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, cfg)...).WithStatusSubresource(&v1alpha1.AgentConfig{}).Build()
	store, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clk := clocktesting.NewFakeClock(t0)
	n := &Notifier{Client: c, Outbox: store.(outbox.Store), Transcript: store, Secrets: keys{"hook/signingKey": "s3cret"},
		HTTP: http.DefaultClient, Console: "https://console.example", Clock: clk, Log: logr.Discard()}
	n.init()
	return n, clk, c
}

func refundRun() *v1alpha1.AgentRun {
	run := MakeRun("refund-7", "team-a").Config("refunds").Obj()
	run.UID = "u1"
	return run
}

// deliverDue delivers what is due now, one after another.
func deliverDue(t *testing.T, n *Notifier) int {
	t.Helper()
	due, err := n.Outbox.Due(context.Background(), n.Clock.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range due {
		n.deliver(context.Background(), e)
	}
	return len(due)
}

// A gate's opening and its decision reach the sink signed, in order, at least once: a first
// delivery answered 500 is tried again once due, and a run's next event waits for it. The
// sink's counts go on its config's status, and nothing on the run's.
func TestEventsReachTheSinkInOrderAtLeastOnce(t *testing.T) {
	rec := &receiver{statuses: []int{http.StatusInternalServerError}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	n, clk, c := newNotifier(t, srv.URL)
	ctx := context.Background()
	run := refundRun()
	running := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval,
		PendingApproval: &v1alpha1.PendingApproval{Gate: "plan", Since: metav1.NewMicroTime(t0)}}
	n.derive(ctx, &running, run)
	waiting := *run.Status.DeepCopy()
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning,
		Approvals: []v1alpha1.ApprovalRecord{{Gate: "plan", Decision: v1alpha1.RecordApproved, By: "bob", Time: metav1.NewTime(t0)}}}
	n.derive(ctx, &waiting, run)
	// Derived again, as after a restart: nothing new is stored.
	n.derive(ctx, nil, run)

	if got := deliverDue(t, n); got != 1 || len(rec.took) != 0 {
		t.Fatalf("delivered %d, the sink took %d: the opening was refused with 500", got, len(rec.took))
	}
	if got := deliverDue(t, n); got != 0 {
		t.Fatalf("%d delivered before the failed one was due again: the decision must wait for the opening", got)
	}
	clk.Step(2 * time.Second)
	deliverDue(t, n)
	deliverDue(t, n)
	if rec.bad != 0 || len(rec.took) != 2 || rec.took[0].Type != v1alpha1.NotifyGateOpened || rec.took[1].Type != v1alpha1.NotifyGateDecided {
		t.Fatalf("the sink took %+v (%d badly signed)", rec.took, rec.bad)
	}
	if rec.took[0].URL != "https://console.example/runs/team-a/refund-7#gate" || rec.took[1].Decision != v1alpha1.RecordApproved {
		t.Errorf("events %+v", rec.took)
	}
	n.flush(ctx)
	cfg := &v1alpha1.AgentConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "refunds"}, cfg); err != nil {
		t.Fatal(err)
	}
	if st := cfg.Status.Notifications; len(st) != 1 || st[0].Sent != 2 || st[0].Retrying != 0 || st[0].LastError == "" {
		t.Errorf("the config's notification status %+v", st)
	}
}

// A sink that refuses an event for good (a 4xx) is not tried again, and its config says it
// fails.
func TestARefusedEventIsGivenUp(t *testing.T) {
	rec := &receiver{statuses: []int{http.StatusBadRequest}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	n, clk, c := newNotifier(t, srv.URL)
	ctx := context.Background()
	run := refundRun()
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseFailed, TerminationReason: v1alpha1.ReasonApprovalExpired,
		CompletionTime: &metav1.Time{Time: t0}}
	n.derive(ctx, &v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval}, run)
	deliverDue(t, n)
	clk.Step(time.Hour)
	if got := deliverDue(t, n); got != 0 {
		t.Fatalf("a refused event was tried %d more times", got)
	}
	n.flush(ctx)
	cfg := &v1alpha1.AgentConfig{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "refunds"}, cfg)
	if st := cfg.Status.Notifications; len(st) != 1 || st[0].GivenUp != 1 {
		t.Errorf("status %+v", st)
	}
	if c := cfg.Status.Conditions; len(c) != 1 || c[0].Type != v1alpha1.ConditionNotifying || c[0].Status != metav1.ConditionFalse {
		t.Errorf("conditions %+v", c)
	}
}

// With nothing failing, each event is sent once, whatever the deliveries' overlap with the
// outbox's reads: a read made before an entry's delivery finished does not send it again.
func TestEachEventIsSentOnceWhenNothingFails(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ce struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ce)
		mu.Lock()
		sent[ce.ID]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	n, _, _ := newNotifier(t, srv.URL)
	n.Clock = clock.RealClock{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.deliverLoop(ctx)
	const gates = 300
	running := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning}
	for i := range gates {
		run := refundRun()
		run.Name, run.UID = fmt.Sprintf("refund-%d", i), types.UID(fmt.Sprintf("u%d", i))
		run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval,
			PendingApproval: &v1alpha1.PendingApproval{Gate: "plan", Since: metav1.NewMicroTime(time.Now())}}
		n.derive(ctx, &running, run)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := len(sent)
		mu.Unlock()
		if got == gates || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != gates {
		t.Fatalf("%d of %d events sent", len(sent), gates)
	}
	for id, times := range sent {
		if times != 1 {
			t.Errorf("event %s sent %d times", id, times)
		}
	}
}
