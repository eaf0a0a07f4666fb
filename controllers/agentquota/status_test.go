package agentquota

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	. "github.com/baton-dev/baton/test/builders"
)

// ignoreTimes leaves out of a comparison what depends on when a condition changed.
var ignoreTimes = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

// quotaEnv is the quota controller on a fake API server, with the cache's indexes, and the
// ledger and transcript store in SQLite; writes counts the status writes the API server took.
type quotaEnv struct {
	r      *Reconciler
	c      client.Client
	clk    *clocktesting.FakeClock
	store  transcript.Store
	writes int
}

func newQuotaEnv(t *testing.T, at time.Time, objs ...client.Object) *quotaEnv {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e := &quotaEnv{clk: clocktesting.NewFakeClock(at), store: store}
	b := fake.NewClientBuilder().WithScheme(scheme)
	if err := Index(ctx, indexer{b}); err != nil {
		t.Fatal(err)
	}
	e.c = b.WithObjects(objs...).WithStatusSubresource(&v1alpha1.AgentQuota{}, &v1alpha1.AgentRun{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if _, ok := obj.(*v1alpha1.AgentQuota); ok {
					e.writes++
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	e.r = &Reconciler{Client: e.c, Clock: e.clk, Usage: &Usage{Reader: e.c, Ledger: ledger.New(store), Bytes: store}}
	return e
}

// reconcile reconciles the quota q of team-a and returns its status as stored after.
func (e *quotaEnv) reconcile(t *testing.T) (v1alpha1.AgentQuotaStatus, ctrl.Result) {
	t.Helper()
	key := client.ObjectKey{Namespace: "team-a", Name: "q"}
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.AgentQuota{}
	if err := e.c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got.Status, res
}

// teamQuota is the AgentQuota q of team-a, at generation 4.
func teamQuota(spec v1alpha1.AgentQuotaSpec) *v1alpha1.AgentQuota {
	q := &v1alpha1.AgentQuota{Spec: spec}
	q.Name, q.Namespace, q.Generation = "q", "team-a", 4
	return q
}

// ready is a quota's Ready condition at generation 4: True with room, else False and why.
func ready(why string) []metav1.Condition {
	if why == "" {
		return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonHasRoom, Message: "runs can start", ObservedGeneration: 4}}
	}
	return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonQuotaExceeded, Message: why, ObservedGeneration: 4}}
}

// branchOf is a branch run of parent, at work.
func branchOf(parent, name string) *v1alpha1.AgentRun {
	b := runIn(name, v1alpha1.PhaseRunning, false)
	b.Spec.Branch = &v1alpha1.RunBranch{Parent: parent, Step: 1, Index: 1, Agent: "researcher", Depth: 1}
	return b
}

// kueueRun is a run Queued for Kueue's admission, not for its quotas.
func kueueRun(name string) *v1alpha1.AgentRun {
	r := runIn(name, v1alpha1.PhaseQueued, false)
	r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonAwaitingAdmission, Message: "waiting for Kueue", LastTransitionTime: metav1.NewTime(now)}}
	return r
}

// A quota's status says what its namespace uses (runs at work, held at a cap and in line, the
// day's and month's spend from the ledger, the next reset) and whether runs can start, for the
// quota's generation. A branch counts in no quota (its parent does), nor does a run waiting for
// Kueue stand in the quota's line. The status is looked at again within seconds, and at the
// day's reset when that comes sooner.
func TestAQuotasStatusSaysWhatItsNamespaceUses(t *testing.T) {
	nextDay := metav1.NewTime(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	for name, tc := range map[string]struct {
		spec  v1alpha1.AgentQuotaSpec
		runs  []client.Object
		spent []transcript.Spend
		at    time.Time
		want  v1alpha1.AgentQuotaStatus
		every time.Duration
	}{
		"a namespace with room": {spec: v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](3)},
			runs: []client.Object{runIn("a", v1alpha1.PhaseRunning, false), runIn("done", v1alpha1.PhaseSucceeded, false)}, at: now, every: every,
			want: v1alpha1.AgentQuotaStatus{Running: 1, CostToday: "0", CostThisMonth: "0", Currency: "USD", ResetTime: &nextDay, ObservedGeneration: 4,
				Conditions: ready("")}},
		"runs past maxRunningRuns, in line": {spec: v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](2)},
			runs: []client.Object{runIn("a", v1alpha1.PhaseRunning, false), branchOf("a", "a-b1-1"), runIn("gated", v1alpha1.PhaseAwaitingApproval, false),
				runIn("q1", v1alpha1.PhaseQueued, false), runIn("q2", v1alpha1.PhaseQueued, false), kueueRun("k"),
				runIn("done", v1alpha1.PhaseFailed, false)}, at: now, every: every,
			want: v1alpha1.AgentQuotaStatus{Running: 2, Queued: 2, CostToday: "0", CostThisMonth: "0", Currency: "USD", ResetTime: &nextDay, ObservedGeneration: 4,
				Conditions: ready("2 of 2 runs running")}},
		"a run held at a cost cap the day has not reached": {spec: v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("10")},
			runs:  []client.Object{runIn("h", v1alpha1.PhaseRunning, true)},
			spent: []transcript.Spend{{Day: "2026-11-28", Currency: "USD", CostNanos: 9_500_000_000, Tokens: 4000}}, at: now, every: every,
			want: v1alpha1.AgentQuotaStatus{Running: 1, HeldRuns: 1, CostToday: "9.5", CostThisMonth: "9.5", Currency: "USD", TokensToday: 4000, TokensThisMonth: 4000,
				ResetTime: &nextDay, ObservedGeneration: 4, Conditions: ready("1 runs wait at a cost or token cap, their next model calls not made")}},
		"the day's tokens used, two seconds before the day resets": {spec: v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](1000)},
			spent: []transcript.Spend{{Day: "2026-11-28", Currency: "USD", Tokens: 1000}, {Day: "2026-11-02", Currency: "USD", Tokens: 500}},
			at:    nextDay.Add(-2 * time.Second), every: 3 * time.Second,
			want: v1alpha1.AgentQuotaStatus{CostToday: "0", CostThisMonth: "0", Currency: "USD", TokensToday: 1000, TokensThisMonth: 1500, ResetTime: &nextDay, ObservedGeneration: 4,
				Conditions: ready("1000 of 1000 tokens used today (UTC); the day resets at 2026-11-29T00:00:00Z")}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newQuotaEnv(t, tc.at, append(tc.runs, teamQuota(tc.spec))...)
			for _, s := range tc.spent {
				if err := e.store.Book(context.Background(), "team-a", s); err != nil {
					t.Fatal(err)
				}
			}
			got, res := e.reconcile(t)
			if diff := cmp.Diff(tc.want, got, ignoreTimes); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if res.RequeueAfter != tc.every {
				t.Errorf("looked at again after %s; want %s", res.RequeueAfter, tc.every)
			}
		})
	}
}

// A quota's status is written when what it says changed, and not otherwise: a namespace whose
// use stays the same costs the API server no writes.
func TestAQuotasStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	queued := MakeRun("r", "team-a").Config("c").Obj()
	queued.Status.Phase = v1alpha1.PhaseQueued
	e := newQuotaEnv(t, now, teamQuota(v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](1)}), queued)
	steps := []struct {
		name   string
		change func(*v1alpha1.AgentRun)
		writes int
	}{
		{name: "first look", writes: 1},
		{name: "nothing changed", writes: 1},
		{name: "the run started", change: func(r *v1alpha1.AgentRun) { r.Status.Phase = v1alpha1.PhaseRunning }, writes: 2},
		{name: "five seconds later, nothing changed", writes: 2},
	}
	for _, s := range steps {
		if s.change != nil {
			run := &v1alpha1.AgentRun{}
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(queued), run); err != nil {
				t.Fatal(err)
			}
			s.change(run)
			if err := e.c.Status().Update(context.Background(), run); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := e.reconcile(t)
		if e.writes != s.writes {
			t.Fatalf("%s: %d status writes, status %+v; want %d writes", s.name, e.writes, got, s.writes)
		}
		e.clk.Step(every)
	}
}

// A quota deleted before it is looked at is no error, and nothing is written.
func TestAQuotaThatIsGoneIsLeftAlone(t *testing.T) {
	e := newQuotaEnv(t, now)
	if _, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "q"}}); err != nil || e.writes > 0 {
		t.Fatalf("error %v, %d writes; want neither", err, e.writes)
	}
}
