package agentrun

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/internal/replay/stored/storedtest"
	"github.com/baton-dev/baton/internal/replay/worker"
	"github.com/baton-dev/baton/internal/steps"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

var replayT0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// helpdesk is the config the recorded run ran and the replay checks: triage hands a ticket to
// billing and back, and the resolver closes it.
func helpdesk() *v1alpha1.AgentConfig {
	c := MakeConfig("helpdesk", "ns").Agents(
		MakeAgent("triage").HandsOffTo("billing", "resolver"),
		MakeAgent("billing").HandsOffTo("triage"),
		MakeAgent("resolver").Terminator(),
	).Obj()
	c.UID = "config-uid"
	return c
}

// replayEnv is a reconciler on a fake client and a real store, with a recorded run of the
// helpdesk, "ticket", in both.
type replayEnv struct {
	t      *testing.T
	r      *Reconciler
	c      client.Client
	store  transcript.Store
	ticket *v1alpha1.AgentRun
	// written is what the recorded run's transcript takes.
	written int64
}

// newReplayEnv makes the environment, with objs besides the config and the recorded run, and
// store wrapped by wrap when it is given.
func newReplayEnv(t *testing.T, cfg ReplayConfig, wrap func(transcript.Store) transcript.Store, objs ...client.Object) *replayEnv {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	config := helpdesk()
	p, errs := workflow.NewPlan(config.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	rec := storedtest.NewRecorder(t, store, p.ForRun("ticket", "ns", "", ""), "ns", "ticket", "helpdesk", "helpdesk-recorded", "my invoice is wrong", replayT0)
	for _, res := range storedtest.Ticket(6, 4096) {
		rec.Step(res)
	}
	ticket := rec.Ended()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.AgentRun{}, &v1alpha1.AgentQuota{}).
		WithObjects(append(objs, config, ticket)...)
	if err := agentquota.Index(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	s := store
	if wrap != nil {
		s = wrap(store)
	}
	clk := clocktesting.NewFakeClock(replayT0.Add(time.Hour))
	r := New(Config{Client: c, APIReader: c, Scheme: scheme, Recorder: events.NewFakeRecorder(100), Clock: clk,
		Providers: providers.New(agents.Dependencies{}), Transcript: s, Steps: steps.New(steps.Config{Store: s, Clock: clk}), Replays: cfg})
	startWriter(t, r)
	return &replayEnv{t: t, r: r, c: c, store: store, ticket: ticket, written: rec.Bytes}
}

// replayRun is a run of the helpdesk that replays the recorded run named.
func replayRun(name, recorded string) *v1alpha1.AgentRun {
	run := MakeRun(name, "ns").Config("helpdesk").Obj()
	run.UID = types.UID("uid-" + run.Name)
	run.Spec.Replay = &v1alpha1.RunReplay{Run: recorded}
	return run
}

// create makes the run name that replays the recorded run, and gives it status found, if one is
// given: as an operator that stopped left it.
func (e *replayEnv) create(name, recorded string, found *v1alpha1.AgentRunStatus) {
	e.t.Helper()
	run := replayRun(name, recorded)
	if err := e.c.Create(context.Background(), run); err != nil {
		e.t.Fatal(err)
	}
	if found == nil {
		return
	}
	run.Status = *found
	if err := e.c.Status().Update(context.Background(), run); err != nil {
		e.t.Fatal(err)
	}
}

// reconcile reconciles the run once and returns it as the API server then holds it.
func (e *replayEnv) reconcile(name string) (*v1alpha1.AgentRun, ctrl.Result) {
	e.t.Helper()
	key := client.ObjectKey{Namespace: "ns", Name: name}
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	settle(e.t, e.r, key)
	run := &v1alpha1.AgentRun{}
	if err := e.c.Get(context.Background(), key, run); err != nil {
		e.t.Fatal(err)
	}
	return run, res
}

// woken waits for the replay pool to wake a run, and says which.
func (e *replayEnv) woken() string {
	e.t.Helper()
	select {
	case ev := <-e.r.replays.Woken():
		return ev.Object.GetName()
	case <-time.After(30 * time.Second):
		e.t.Fatal("no run was woken after 30s")
		return ""
	}
}

// replayState is where the run's replay is in the reconciler's pool.
func (e *replayEnv) replayState(run *v1alpha1.AgentRun) worker.State {
	state, _, _ := e.r.replays.State(client.ObjectKeyFromObject(run), run.UID)
	return state
}

// pinned is the revision the helpdesk as it is now is pinned as, made if need be.
func (e *replayEnv) pinned() string {
	e.t.Helper()
	rev, err := e.r.revisions.pin(context.Background(), helpdesk())
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// A replay run is admitted and Running while its replay runs outside the reconcile, then ends
// with what the replay found, past its budget, or, found replaying after the operator stopped,
// begins another replay while it may.
func TestAReplayRunIsRunningWhileItReplaysAndEndsWithWhatItFound(t *testing.T) {
	replaying := func(attempts int32) func(e *replayEnv) v1alpha1.AgentRunStatus {
		return func(e *replayEnv) v1alpha1.AgentRunStatus {
			st := workflow.StartReplay(v1alpha1.AgentRunStatus{}, "ticket", e.pinned(), replayT0.Add(time.Minute)).Status
			st.Replay.Attempts = attempts
			return st
		}
	}
	cases := map[string]struct {
		replays  ReplayConfig
		recorded string
		found    func(e *replayEnv) v1alpha1.AgentRunStatus
		// replaying is set when the run replays after its first reconcile, with this attempt.
		replaying int32
		phase     v1alpha1.RunPhase
		reason    v1alpha1.TerminationReason
		message   []string
	}{
		"on the config the recorded run ran": {replaying: 1, phase: v1alpha1.PhaseSucceeded, reason: v1alpha1.ReasonReplayed,
			message: []string{"replayed run ticket on the config as it is now: it ran the same path, tokens and end (Completed)"}},
		"past the operator's byte budget": {replays: ReplayConfig{MaxReadBytes: 8 << 10}, replaying: 1,
			phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonReplayBudgetExceeded,
			message: []string{"spec.replay: the replay of run ticket read ", "more than the 8192 bytes (0.0 MiB) a replay may read (the operator's --replay-max-read-bytes)"}},
		"found replaying after the operator stopped during its first attempt": {found: replaying(1), replaying: 2,
			phase: v1alpha1.PhaseSucceeded, reason: v1alpha1.ReasonReplayed, message: []string{"it ran the same path, tokens and end (Completed)"}},
		"found replaying after its last attempt": {found: replaying(3), phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonReplayBudgetExceeded,
			message: []string{"the replay of run ticket was begun 3 times and never ended: the operator stopped during it; a replay is begun at most 3 times"}},
		"of a run that does not exist": {recorded: "nowhere", phase: v1alpha1.PhaseFailed, reason: v1alpha1.ReasonConfigInvalid,
			message: []string{"spec.replay: run nowhere does not exist in namespace ns"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newReplayEnv(t, tc.replays, nil)
			recorded := "ticket"
			if tc.recorded != "" {
				recorded = tc.recorded
			}
			var found *v1alpha1.AgentRunStatus
			if tc.found != nil {
				found = ptr.To(tc.found(e))
			}
			e.create("check", recorded, found)
			run, _ := e.reconcile("check")
			if tc.replaying > 0 {
				if run.Status.Phase != v1alpha1.PhaseRunning || run.Status.Replay == nil || run.Status.Replay.Attempts != tc.replaying || run.Status.StartTime == nil {
					t.Fatalf("after its first reconcile the run is %s, replay %+v", run.Status.Phase, run.Status.Replay)
				}
				if woken := e.woken(); woken != "check" {
					t.Fatalf("woke %s", woken)
				}
				run, _ = e.reconcile("check")
			}
			if run.Status.Phase != tc.phase || run.Status.TerminationReason != tc.reason {
				t.Fatalf("the run is %s (%s): %s", run.Status.Phase, run.Status.TerminationReason, run.Status.TerminationMessage)
			}
			for _, m := range tc.message {
				if !strings.Contains(run.Status.TerminationMessage, m) {
					t.Errorf("message %q does not say %q", run.Status.TerminationMessage, m)
				}
			}
			if tc.reason == v1alpha1.ReasonReplayed {
				if run.Status.Replay.Attempts != tc.replaying || run.Status.Replay.Diverged != 0 || run.Status.Replay.Replayed.Steps != 6 ||
					len(run.Status.HandoffSequence) == 0 || run.Status.TokensUsed != 0 {
					t.Errorf("status.replay %+v, %d handoffs, %d tokens", run.Status.Replay, len(run.Status.HandoffSequence), run.Status.TokensUsed)
				}
			}
			// The end is final: the run is forgotten, and nothing replays it again.
			if again, _ := e.reconcile("check"); again.Status.Phase != tc.phase || e.replayState(again) != worker.None {
				t.Errorf("after its end the run is %s and its replay %d", again.Status.Phase, e.replayState(again))
			}
		})
	}
}

// A replay run counts in maxRunningRuns like any run: behind a full quota it waits Queued, and
// its replay does not begin.
func TestAReplayRunWaitsQueuedBehindMaxRunningRuns(t *testing.T) {
	quota := &v1alpha1.AgentQuota{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "ns"},
		Spec: v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](1)}}
	busy := MakeRun("busy", "ns").Config("helpdesk").Obj()
	start := metav1.NewMicroTime(replayT0)
	busy.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, StartTime: &start, ConfigRevision: "helpdesk-recorded", CurrentAgent: "triage"}
	e := newReplayEnv(t, ReplayConfig{}, nil, quota, busy)
	e.create("check", "ticket", nil)
	run, res := e.reconcile("check")
	c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionProgressing)
	if run.Status.Phase != v1alpha1.PhaseQueued || c == nil || c.Reason != v1alpha1.ReasonQuotaExceeded || res.RequeueAfter == 0 {
		t.Fatalf("behind a full quota the replay run is %s (%+v), requeued after %s", run.Status.Phase, c, res.RequeueAfter)
	}
	if state := e.replayState(run); state != worker.None || run.Status.Replay != nil {
		t.Errorf("a queued replay run's replay is %d, status.replay %+v", state, run.Status.Replay)
	}
}

// blockingStore is a transcript store whose reads wait until it is opened, or their context
// ends.
type blockingStore struct {
	transcript.Store
	open chan struct{}
}

func (s *blockingStore) List(ctx context.Context, q transcript.Query) ([]transcript.Record, error) {
	select {
	case <-s.open:
		return s.Store.List(ctx, q)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The reconcile never waits for a replay: while one reads, the run's reconciles return at
// once, and a namespace's replays beyond its bound wait for a slot.
func TestTheReconcileDoesNotWaitForTheReplay(t *testing.T) {
	blocking := &blockingStore{open: make(chan struct{})}
	e := newReplayEnv(t, ReplayConfig{PerNamespace: 1}, func(s transcript.Store) transcript.Store { blocking.Store = s; return blocking })
	e.create("first", "ticket", nil)
	e.create("second", "ticket", nil)
	done := make(chan struct{})
	var first, second *v1alpha1.AgentRun
	go func() {
		defer close(done)
		first, _ = e.reconcile("first")
		first, _ = e.reconcile("first")
		second, _ = e.reconcile("second")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the reconciles waited for the replay")
	}
	if first.Status.Phase != v1alpha1.PhaseRunning || e.replayState(first) != worker.Running {
		t.Fatalf("the first run is %s, its replay %d", first.Status.Phase, e.replayState(first))
	}
	if second.Status.Phase != v1alpha1.PhaseRunning || e.replayState(second) != worker.Waiting {
		t.Fatalf("the second run is %s, its replay %d with the namespace's one slot taken", second.Status.Phase, e.replayState(second))
	}
	close(blocking.open)
	for range 2 {
		e.woken()
	}
	for _, name := range []string{"first", "second"} {
		if run, _ := e.reconcile(name); run.Status.TerminationReason != v1alpha1.ReasonReplayed {
			t.Errorf("%s: %s (%s)", name, run.Status.Phase, run.Status.TerminationMessage)
		}
	}
}

// A replay run cancelled while it replays gives its replay up.
func TestACancelledReplayRunGivesItsReplayUp(t *testing.T) {
	blocking := &blockingStore{open: make(chan struct{})}
	e := newReplayEnv(t, ReplayConfig{}, func(s transcript.Store) transcript.Store { blocking.Store = s; return blocking })
	e.create("check", "ticket", nil)
	run, _ := e.reconcile("check")
	if e.replayState(run) != worker.Running {
		t.Fatalf("the replay is %d", e.replayState(run))
	}
	patch := client.MergeFrom(run.DeepCopy())
	run.Annotations = map[string]string{v1alpha1.AnnotationCancel: "not needed"}
	if err := e.c.Patch(context.Background(), run, patch); err != nil {
		t.Fatal(err)
	}
	if run, _ = e.reconcile("check"); run.Status.Phase != v1alpha1.PhaseCancelled {
		t.Fatalf("cancelled: %s", run.Status.Phase)
	}
	if run, _ = e.reconcile("check"); e.replayState(run) != worker.None {
		t.Errorf("the replay of a cancelled run is %d", e.replayState(run))
	}
}

// failingStore is a transcript store whose first read fails.
type failingStore struct {
	transcript.Store
	failed bool
}

func (s *failingStore) List(ctx context.Context, q transcript.Query) ([]transcript.Record, error) {
	if !s.failed {
		s.failed = true
		return nil, errors.New("database is locked")
	}
	return s.Store.List(ctx, q)
}

// A replay that could not read the store is begun again, counted, and says why in the run's
// Progressing condition, not the store's words.
func TestAReplayThatCouldNotReadTheStoreIsBegunAgain(t *testing.T) {
	e := newReplayEnv(t, ReplayConfig{}, func(s transcript.Store) transcript.Store { return &failingStore{Store: s} })
	e.create("check", "ticket", nil)
	e.reconcile("check")
	e.woken()
	run, _ := e.reconcile("check")
	c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionProgressing)
	if run.Status.Phase != v1alpha1.PhaseRunning || run.Status.Replay.Attempts != 2 || c == nil ||
		c.Message != "replaying the transcript of run ticket (attempt 2 of 3): attempt 1 did not end, it could not read the transcript store, as the operator's log shows" {
		t.Fatalf("after a failed read the run is %s, attempt %d, %+v", run.Status.Phase, run.Status.Replay.Attempts, c)
	}
	e.woken()
	if run, _ = e.reconcile("check"); run.Status.TerminationReason != v1alpha1.ReasonReplayed || run.Status.Replay.Attempts != 2 {
		t.Errorf("the second attempt: %s, %d attempts (%s)", run.Status.TerminationReason, run.Status.Replay.Attempts, run.Status.TerminationMessage)
	}
}
