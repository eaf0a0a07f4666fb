package agentrun

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/steps"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// holdingWrites is c, whose status writes wait until release is closed, each saying so on
// entered first: an API server that is slow to take writes.
func holdingWrites(c client.Client, entered chan<- struct{}, release <-chan struct{}) client.Client {
	return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			entered <- struct{}{}
			<-release
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

// reconcileUntil reconciles the run, and again whenever its step ends or a write of it does,
// until done holds; it fails the test after a while.
func (o *operator) reconcileUntil(t *testing.T, name string, done func() bool) {
	t.Helper()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
	deadline := time.After(20 * time.Second)
	for !done() {
		if _, err := o.r.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconciling %s: %v", name, err)
		}
		select {
		case <-o.r.Steps.Woken():
		case <-o.r.writer.Woken():
		case <-o.watch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("run %s is not as wanted after 20s", name)
		}
	}
}

// eventReasons are the reasons of the Events recorded so far.
func eventReasons(r *Reconciler) []string {
	var out []string
	for {
		select {
		case e := <-r.Recorder.(*events.FakeRecorder).Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

// A reconcile hands the status it decided to the status writer and returns: a run whose
// writes the API server holds up goes on to its end all the same, and what it decided is written
// once the API server takes it, with its Events after the write, not before.
func TestARunGoesOnWhileItsStatusWriteWaits(t *testing.T) {
	run := MakeRun("r", ns).Config("relay").Input("go").Obj()
	run.UID = types.UID("uid-r")
	cfg := relay()
	cfg.Spec.Limits.MaxSteps = ptr.To[int32](3) // an end that says so in an Event
	o := newOperator(t, cfg, run)
	o.r.StatusBatchPeriod = time.Second
	entered, release := make(chan struct{}, 16), make(chan struct{})
	o.r.Client = holdingWrites(o.cluster.Client, entered, release)

	o.reconcileUntil(t, "r", func() bool { return o.r.runs.heldPhase(run).Terminal() })
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no status write was made")
	}
	if got := o.run(t, "r").Status.Phase; got != "" {
		t.Fatalf("the API server holds the run %s while its write waits", got)
	}
	if reasons := eventReasons(o.r); len(reasons) > 0 {
		t.Fatalf("Events %v were recorded before the write they explain", reasons)
	}

	close(release)
	got := o.drive(t, "r", ended).Status
	if got.TerminationReason != v1alpha1.ReasonMaxStepsExceeded || got.StepCount != 3 || got.TokensUsed != 300 {
		t.Fatalf("ended %s after %d steps and %d tokens; want MaxStepsExceeded after 3 and 300", got.TerminationReason, got.StepCount, got.TokensUsed)
	}
	if w := o.writes("r"); w > 2 {
		t.Errorf("%d status writes; want at most 2 (what the run held when the first was due, and its end)", w)
	}
	if reasons := eventReasons(o.r); strings.Count(strings.Join(reasons, " "), string(v1alpha1.ReasonMaxStepsExceeded)) != 1 {
		t.Errorf("Events %v; want the run's end once", reasons)
	}
}

// With every step written (a batch period of 0), a run's next step starts only once its last
// step's status is written, though the reconcile that handed it off did not wait for it.
func TestEveryStepWrittenStartsTheNextOnceWritten(t *testing.T) {
	run := MakeRun("r", ns).Config("relay").Input("go").Obj()
	run.UID = types.UID("uid-r")
	o := newOperator(t, relay(), run)
	entered, release := make(chan struct{}, 16), make(chan struct{})
	o.r.Client = holdingWrites(o.cluster.Client, entered, release)

	first := false
	o.reconcileUntil(t, "r", func() bool {
		select {
		case <-entered:
			first = true
		default:
		}
		return first
	})
	if _, err := o.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(run)}); err != nil {
		t.Fatal(err)
	}
	state, _, err := o.r.Steps.Next(context.Background(), o.run(t, "r"), workflow.Step{Number: 2, Agent: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if state != steps.NotStarted {
		t.Fatalf("step 2 is %v while step 1's write waits; want it not started", state)
	}

	close(release)
	got := o.drive(t, "r", ended).Status
	if got.TerminationReason != v1alpha1.ReasonCompleted || got.StepCount != 5 {
		t.Fatalf("ended %s after %d steps; want Completed after 5", got.TerminationReason, got.StepCount)
	}
	if w := o.writes("r"); w != 5 {
		t.Errorf("%d status writes; want 5, one a step", w)
	}
}

// A status write that keeps failing (not for a conflict: the API server refuses it, or is down)
// is tried again later each time, up to a minute apart, not every second for ever.
func TestAFailingStatusWriteIsTriedLessAndLessOften(t *testing.T) {
	for n, want := range map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 100: time.Minute,
	} {
		if got := retryAfter(n); got != want {
			t.Errorf("after %d failures in a row, tried again in %s; want %s", n, got, want)
		}
	}
}

// With every step written, steps that a restarted operator applies one after another from their
// records are each written, not merged into one write: kubectl get -w shows each.
func TestEveryStepWrittenAfterARestartWritesEachStepApplied(t *testing.T) {
	run := MakeRun("r", ns).Config("relay").Input("go").Obj()
	run.UID = types.UID("uid-r")
	o := newOperator(t, relay(), run)
	// The first operator runs every step, and none of its writes reaches the API server.
	o.r.StatusBatchPeriod = time.Hour
	entered, release := make(chan struct{}, 16), make(chan struct{})
	var refuse atomic.Bool
	o.r.Client = interceptor.NewClient(o.cluster.Client.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			entered <- struct{}{}
			<-release
			if refuse.Load() {
				return apierrors.NewServiceUnavailable("the first operator is gone")
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	t.Cleanup(func() { refuse.Store(true); close(release) })
	o.reconcileUntil(t, "r", func() bool { return o.r.runs.heldPhase(run).Terminal() })
	if got := o.writes("r"); got != 0 {
		t.Fatalf("%d writes of the first operator reached the API server; this test needs none", got)
	}

	// The operator restarts, every step written: it applies the five steps from their records.
	cfg := o.r.Config
	cfg.Client, cfg.StatusBatchPeriod = o.cluster.Client, 0
	o.r = New(cfg)
	startWriter(t, o.r)
	got := o.drive(t, "r", ended).Status
	if got.TerminationReason != v1alpha1.ReasonCompleted || got.StepCount != 5 {
		t.Fatalf("ended %s after %d steps; want Completed after 5", got.TerminationReason, got.StepCount)
	}
	if w := o.writes("r"); w != 5 {
		t.Errorf("%d status writes after the restart; want 5, one a step", w)
	}
}
