package agentrun

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/steps"
	"github.com/baton-dev/baton/internal/toolbox"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// operator is the AgentRun reconciler on a fake API server (cluster), with its step runner, the
// Scripted provider, a SQLite transcript and the ledger: what the manager runs, without a
// manager. drive reconciles a run as its watches would, until a condition holds.
type operator struct {
	*cluster
	r      *Reconciler
	store  transcript.Store
	ledger *ledger.Ledger
}

// newOperator is an operator over the objects given, its agents on the providers without
// network or keys (Scripted's).
func newOperator(t *testing.T, objs ...client.Object) *operator {
	t.Helper()
	return newOperatorOn(t, agents.Dependencies{Clock: clock.RealClock{}}, objs...)
}

// newOperatorOn is an operator whose providers call out with deps.
func newOperatorOn(t *testing.T, deps agents.Dependencies, objs ...client.Object) *operator {
	t.Helper()
	return newOperatorWith(t, deps, nil, objs...)
}

// newOperatorWith is an operator whose providers call out with deps, and whose agents' tools
// are the clients given (none: steps of agents with tools fail).
func newOperatorWith(t *testing.T, deps agents.Dependencies, clients toolbox.Clients, objs ...client.Object) *operator {
	t.Helper()
	c := newCluster(t, objs...)
	store, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	spend := ledger.New(store)
	clk := deps.Clock
	known := providers.New(deps)
	guards := &guardrails.Client{HTTP: &http.Client{}}
	var boxes *toolbox.Maker
	if clients != nil {
		boxes = &toolbox.Maker{Clients: clients, Store: store, Guardrails: guards}
	}
	runner := steps.New(steps.Config{Store: store, Providers: known, Clock: clk, Log: logr.Discard(), MaxInFlight: 8, Ledger: spend, Toolboxes: boxes,
		Guardrails: guards,
		Quotas: func(ctx context.Context, namespace string) (*quota.Caps, error) {
			return agentquota.Caps(ctx, c, namespace)
		}})
	r := New(Config{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(1000), Clock: clk,
		Providers: known, Secrets: deps.Secrets, Transcript: store, Ledger: spend, Steps: runner})
	startWriter(t, r)
	return &operator{cluster: c, r: r, store: store, ledger: spend}
}

// startWriter runs the reconciler's status writer while the test runs, as the manager does.
func startWriter(t *testing.T, r *Reconciler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = r.writer.Start(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// settle waits until what the run's reconciles handed to the status writer is written, its
// Events emitted, reconciling the run again when a write of it was refused (as the writer's
// wake would); it fails the test after a while.
func settle(t *testing.T, r *Reconciler, key client.ObjectKey) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.runs.handedOff(key) {
		if time.Now().After(deadline) {
			t.Fatalf("the status handed off for %s is not written after 20s", key)
		}
		if r.runs.refused(key) {
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatalf("reconciling %s: %v", key, err)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// drive reconciles the named run, and again whenever its step ends, a write of it is made or a
// requeue comes due, until done says the run is as the test wants it; it fails the test after a
// while.
func (o *operator) drive(t *testing.T, name string, done func(*v1alpha1.AgentRun) bool) *v1alpha1.AgentRun {
	t.Helper()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
	deadline := time.After(20 * time.Second)
	for {
		res, err := o.r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("reconciling %s: %v", name, err)
		}
		if run := o.run(t, name); done(run) {
			settle(t, o.r, req.NamespacedName)
			return o.run(t, name)
		}
		wait := res.RequeueAfter
		if wait <= 0 || wait > 200*time.Millisecond {
			wait = 200 * time.Millisecond
		}
		select {
		case <-o.r.Steps.Woken():
		case <-o.r.writer.Woken():
		case <-o.watch:
		case <-time.After(wait):
		case <-deadline:
			t.Fatalf("run %s is not as wanted after 20s: %+v", name, o.run(t, name).Status)
		}
	}
}

// ended reports whether a run ended.
func ended(run *v1alpha1.AgentRun) bool { return run.Status.Phase.Terminal() }

// handedOff reports whether a status of the run of that name is handed to the writer and not
// yet written, or its branch runs are being made.
func (t *runTable) handedOff(key client.ObjectKey) bool {
	var pending bool
	t.existing(key, func(s *runState) { pending = s.out != nil || s.flight != nil || s.creating })
	return pending
}

// refused reports whether the run of that name has a write refused, waiting for its next
// reconcile (rearm).
func (t *runTable) refused(key client.ObjectKey) bool {
	var refused bool
	t.existing(key, func(s *runState) { refused = s.out != nil && s.out.refused && s.flight == nil })
	return refused
}
