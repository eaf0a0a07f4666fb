package agentrun

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/controllers/agentsession"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/internal/webhook"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// A fan-out on a fake API server: a parent run r in namespace ns whose lead fanned out at step
// 1 to a researcher and a critic, and a reconciler of it, as tests of the branch code use them.

const (
	ns = "ns"
	// operatorUser is the operator's user, which the fake API server's webhook stamps as the
	// creator of the runs the operator creates.
	operatorUser = "system:serviceaccount:baton-system:baton"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// cluster is a fake API server and what the tests look at of it.
type cluster struct {
	client.Client
	// creates are the runs created (not dry runs), by name, in order.
	creates []string
	// cancelled are the runs whose cancel annotation was patched, by name.
	cancelled []string
	// mu guards creates and statusWrites, made by the creators' and the status writer's
	// goroutines.
	mu sync.Mutex
	// statusWrites counts the status writes of each run, by name.
	statusWrites map[string]int
	// watch hears of each status write, as the operator's watch of runs would.
	watch chan struct{}
}

// made are the runs created so far, by name, in order.
func (c *cluster) made() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.creates)
}

// writes is how many status writes of the run named the API server took.
func (c *cluster) writes(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusWrites[name]
}

// newCluster is a fake API server holding objs, which, as Baton's webhook would, stamps the
// creator of each run created with the operator's user (every create here is the operator's)
// and gives it a UID, and answers a dry-run create as the webhook's probe expects.
func newCluster(t *testing.T, objs ...client.Object) *cluster {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, kueuev1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{statusWrites: map[string]int{}, watch: make(chan struct{}, 1)}
	b := fake.NewClientBuilder().WithScheme(scheme)
	// The cache's indexes that quotas read, as the manager has them.
	if err := agentquota.Index(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	if err := agentsession.AddIndex(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	c.Client = b.WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.AgentRun{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if a := obj.GetAnnotations(); a[v1alpha1.AnnotationCreatedBy] == "" {
					obj.SetAnnotations(mergeAnnotation(a, v1alpha1.AnnotationCreatedBy, operatorUser))
				}
				if slices.Contains((&client.CreateOptions{}).ApplyOptions(opts).DryRun, metav1.DryRunAll) {
					return nil
				}
				obj.SetUID(types.UID("uid-of-" + obj.GetName()))
				c.mu.Lock()
				c.creates = append(c.creates, obj.GetName())
				c.mu.Unlock()
				return cl.Create(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if err := cl.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				c.mu.Lock()
				c.statusWrites[obj.GetName()]++
				c.mu.Unlock()
				select {
				case c.watch <- struct{}{}:
				default:
				}
				return nil
			},
			Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := cl.Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				if _, ok := obj.GetAnnotations()[v1alpha1.AnnotationCancel]; ok {
					c.cancelled = append(c.cancelled, obj.GetName())
				}
				return nil
			},
		}).Build()
	return c
}

// run is the named run as the fake API server holds it.
func (c *cluster) run(t *testing.T, name string) *v1alpha1.AgentRun {
	t.Helper()
	run := &v1alpha1.AgentRun{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		t.Fatalf("reading run %s: %v", name, err)
	}
	return run
}

// fanOutPlan is the plan of a team whose lead fans out to a researcher and a critic (join All,
// onFailure Fail), for run r.
func fanOutPlan(t *testing.T) *workflow.Plan {
	t.Helper()
	cfg := MakeConfig("research", ns).Agents(
		MakeAgent("lead").HandsOffTo("researcher", "critic", "writer").Parallel(2, v1alpha1.BudgetSplit, v1alpha1.Join{}),
		MakeAgent("researcher").HandsOffTo("lead"),
		MakeAgent("critic").HandsOffTo("lead"),
		MakeAgent("writer").Terminator(),
	).Obj()
	p, errs := workflow.NewPlan(cfg.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return p.ForRun("r", ns, v1alpha1.ApprovalsRequired, "")
}

// fanOutStep is the lead's step that fanned out, as its record holds it.
var fanOutStep = workflow.StepResult{Agent: "lead", Input: "a report on X", Result: workflow.Result{Output: "splitting up", Tokens: 100,
	Parallel: []workflow.Branch{{Agent: "researcher", Input: "look into researcher"}, {Agent: "critic", Input: "look into critic"}}}}

// fanOut is run r of the plan right after its lead's step fanned out: its status whole, and as
// the API server stores it.
func fanOut(t *testing.T, p *workflow.Plan) (parent *v1alpha1.AgentRun, whole v1alpha1.AgentRunStatus) {
	t.Helper()
	st := workflow.Start(p, v1alpha1.AgentRunStatus{}, "a report on X", "research-rev", t0).Status
	st = workflow.Apply(p, st, fanOutStep, t0).Status
	if !workflow.Branching(&st) {
		t.Fatalf("the lead's step did not fan out: %+v", st.HandoffSequence)
	}
	parent = MakeRun("r", ns).Config("research").Input("a report on X").Obj()
	parent.UID = "p-uid"
	parent.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}
	parent.Status = *st.DeepCopy()
	workflow.StoreStatus(&parent.Status)
	return parent, st
}

// reconciler is the reconciler of the fake cluster, with the fan-out's step recorded, the
// webhook trusted or not, and status writes batched over batch.
func reconciler(t *testing.T, c *cluster, parent *v1alpha1.AgentRun, trusted bool, batch time.Duration) *Reconciler {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	body := records.StepBody{Agent: "lead", Input: fanOutStep.Input, Result: fanOutStep.Result}
	if _, err := store.Append(context.Background(), body.Record(idOf(parent), 1, t0)); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0.Add(time.Second))
	var trust *webhook.Trust
	if trusted {
		trust = webhook.NewTrust(c, ns, clk, logr.Discard())
	}
	r := New(Config{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Clock: clk,
		Transcript: store, Trust: trust, StatusBatchPeriod: batch})
	startWriter(t, r)
	return r
}

// workingOn is the parent as a reconcile loads it: as the fake API server holds it, with the
// whole status given.
func workingOn(t *testing.T, c *cluster, whole v1alpha1.AgentRunStatus) *working {
	t.Helper()
	run := c.run(t, "r")
	stored := run.Status
	run.Status = *whole.DeepCopy()
	return &working{AgentRun: run, stored: stored}
}

// branchRunOf is the run of the parent's branch index (from 1) as the operator makes it, with
// uid and created by creator.
func branchRunOf(parent *v1alpha1.AgentRun, whole v1alpha1.AgentRunStatus, index int, uid types.UID, creator string) *v1alpha1.AgentRun {
	p := parent.DeepCopy()
	p.Status = whole
	b := whole.Branches[index-1]
	run := branchRun(p, b, fanOutStep.Parallel[index-1].Input, v1alpha1.LimitOverrides{}, 1, int32(index), 1)
	run.UID = uid
	run.Annotations = map[string]string{v1alpha1.AnnotationCreatedBy: creator}
	return run
}

// mergeAnnotation is a with key set to value.
func mergeAnnotation(a map[string]string, key, value string) map[string]string {
	out := map[string]string{key: value}
	for k, v := range a {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// indexer adds the indexes it is given to a fake client's builder.
type indexer struct{ b *fake.ClientBuilder }

func (x indexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	x.b.WithIndex(obj, field, extract)
	return nil
}
