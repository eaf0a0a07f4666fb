package agentquota

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

var now = time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)

// indexer adds the indexes it is given to a fake client's builder.
type indexer struct{ b *fake.ClientBuilder }

func (x indexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	x.b.WithIndex(obj, field, extract)
	return nil
}

func runIn(name string, phase v1alpha1.RunPhase, held bool) *v1alpha1.AgentRun {
	r := &v1alpha1.AgentRun{}
	r.Name, r.Namespace = name, "team-a"
	r.Status.Phase = phase
	if held {
		r.Status.QuotaHold = &v1alpha1.QuotaHold{Quota: "money", Since: metav1.NewMicroTime(now)}
	}
	return r
}

func TestAQuotasStatusReadsTheLedgerNotTheRunsThatStillExist(t *testing.T) {
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
	// What deleted runs spent today and earlier this month; one of their records is still there.
	rec := transcript.Record{Key: transcript.Key{Kind: transcript.KindStep, Step: 1}, RunUID: "gone", Namespace: "team-a", Run: "gone",
		Time: now, Body: []byte(`{"output":"0123456789"}`), Spend: []transcript.Spend{{Day: "2026-11-28", Currency: "USD", CostNanos: 1_500_000_000, Tokens: 700}}}
	if _, err := store.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := store.Book(ctx, "team-a", transcript.Spend{Day: "2026-11-02", Currency: "USD", CostNanos: 3_000_000_000, Tokens: 300}); err != nil {
		t.Fatal(err)
	}
	money := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("10"), DefaultQueue: ptr.To("team-a")}}
	money.Name, money.Namespace, money.Generation = "money", "team-a", 2
	other := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{DefaultQueue: ptr.To("team-b")}}
	other.Name, other.Namespace = "other", "team-a"
	b := fake.NewClientBuilder().WithScheme(scheme)
	if err := Index(ctx, indexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.WithObjects(money, other, runIn("a", v1alpha1.PhaseRunning, false), runIn("h", v1alpha1.PhaseRunning, true),
		runIn("q", v1alpha1.PhaseQueued, false), runIn("done", v1alpha1.PhaseSucceeded, false)).
		WithStatusSubresource(&v1alpha1.AgentQuota{}).Build()
	r := &Reconciler{Client: c, Clock: clocktesting.NewFakeClock(now), Usage: &Usage{Reader: c, Ledger: ledger.New(store), Bytes: store}}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(money)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > every {
		t.Fatalf("requeue after %s, want within %s", res.RequeueAfter, every)
	}
	got := &v1alpha1.AgentQuota{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(money), got); err != nil {
		t.Fatal(err)
	}
	st := got.Status
	if st.Running != 2 || st.Queued != 1 || st.HeldRuns != 1 || st.CostToday != "1.5" || st.CostThisMonth != "4.5" ||
		st.TokensToday != 700 || st.TokensThisMonth != 1000 || st.Currency != "USD" || st.TranscriptBytes != int64(len(rec.Body)) || st.ObservedGeneration != 2 {
		t.Fatalf("status %+v", st)
	}
	c2 := meta.FindStatusCondition(st.Conditions, "Ready")
	if c2 == nil || c2.Status != metav1.ConditionFalse || c2.Reason != v1alpha1.ReasonQuotaConflict {
		t.Fatalf("Ready %+v; want False, QuotaConflict (the quotas name different default queues)", c2)
	}
}

func TestTheCapsOfANamespaceAreWorkedOutAgainOnlyWhenItsQuotasChange(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	q := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](100)}}
	q.Name, q.Namespace = "q", "team-a"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(q).Build()
	cache := &CapsCache{}
	if caps, err := cache.Caps(ctx, c, "elsewhere"); err != nil || caps != nil {
		t.Fatalf("a namespace without quotas: %+v %v; want no caps", caps, err)
	}
	first, err := cache.Caps(ctx, c, "team-a")
	if err != nil || first.TokensPerDay.Limit != 100 {
		t.Fatalf("caps %+v %v", first, err)
	}
	if again, _ := cache.Caps(ctx, c, "team-a"); again != first {
		t.Fatal("the caps were worked out again though no quota changed")
	}
	q.Spec.MaxTokensPerDay = ptr.To[int64](50)
	if err := c.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	if changed, _ := cache.Caps(ctx, c, "team-a"); changed.TokensPerDay.Limit != 50 {
		t.Fatalf("after the quota changed: %+v; want the new cap of 50", changed.TokensPerDay)
	}
}
