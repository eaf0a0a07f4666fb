package agentrun

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// research fans its lead out to two researchers, joined by a writer.
func research() *v1alpha1.AgentConfig {
	return MakeConfig("research", ns).Agents(
		MakeAgent("lead").HandsOffTo("researcher", "writer").Parallel(2, v1alpha1.BudgetSplit, v1alpha1.Join{Agent: "writer"}).
			Script(Says("split").FansOut("researcher", "one", "researcher", "two")),
		MakeAgent("researcher").Terminator().Script(Says("found")),
		MakeAgent("writer").Terminator().Script(Says("report")),
	).Obj()
}

// isBranch reports whether the object is one of run r's branch runs.
func isBranch(obj client.Object) bool { return strings.HasPrefix(obj.GetName(), "r-b") }

// A branch's end reaches its parent in the process: the parent joins, and its join agent
// runs, while the branches' end writes still wait for the API server.
func TestAParentJoinsItsBranchesBeforeTheirEndsAreWritten(t *testing.T) {
	run := MakeRun("r", ns).Config("research").Input("look it up").Obj()
	run.UID = types.UID("uid-r")
	o := newOperator(t, research(), run)
	o.r.StatusBatchPeriod = time.Second
	release := make(chan struct{})
	held := o.cluster.Client.(client.WithWatch)
	o.r.Client = interceptor.NewClient(held, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if isBranch(obj) {
				<-release
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	o.drive(t, "r", func(*v1alpha1.AgentRun) bool { return len(o.made()) == 3 }) // the pin, two branches
	for _, b := range []string{"r-b1-1", "r-b1-2"} {
		branch := o.run(t, b)
		o.reconcileUntil(t, b, func() bool { return o.r.runs.heldPhase(branch).Terminal() })
	}
	o.reconcileUntil(t, "r", func() bool { return o.r.runs.heldPhase(run) == v1alpha1.PhaseSucceeded })
	for _, b := range []string{"r-b1-1", "r-b1-2"} {
		if p := o.run(t, b).Status.Phase; p.Terminal() {
			t.Fatalf("branch %s is %s in the API server; this test needs its end write held", b, p)
		}
	}

	close(release)
	got := o.drive(t, "r", ended).Status
	if got.Phase != v1alpha1.PhaseSucceeded || got.Output != "report" || got.BranchSteps != 2 {
		t.Fatalf("parent %s with output %q and %d branch steps; want Succeeded with the writer's report after 2", got.Phase, got.Output, got.BranchSteps)
	}
}

// A parent whose cache does not show the branch runs it just made yet takes them as made: it
// neither makes them again nor reads them past the cache.
func TestAParentTakesTheBranchesItMadeWhileTheCacheIsBehind(t *testing.T) {
	run := MakeRun("r", ns).Config("research").Input("look it up").Obj()
	run.UID = types.UID("uid-r")
	o := newOperator(t, research(), run)
	var mu sync.Mutex
	behind, fresh := true, 0
	lagging := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return behind
	}
	cache := o.cluster.Client.(client.WithWatch)
	o.r.Client = interceptor.NewClient(cache, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if strings.HasPrefix(key.Name, "r-b") && lagging() {
				return apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "agentruns"}, key.Name)
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := cl.List(ctx, list, opts...); err != nil {
				return err
			}
			if runs, ok := list.(*v1alpha1.AgentRunList); ok && lagging() {
				kept := runs.Items[:0]
				for _, r := range runs.Items {
					if !isBranch(&r) {
						kept = append(kept, r)
					}
				}
				runs.Items = kept
			}
			return nil
		},
	})
	o.r.APIReader = interceptor.NewClient(cache, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if strings.HasPrefix(key.Name, "r-b") {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})

	o.drive(t, "r", func(r *v1alpha1.AgentRun) bool { return len(r.Status.Branches) == 2 && len(o.made()) == 3 })
	for range 3 {
		o.drive(t, "r", func(*v1alpha1.AgentRun) bool { return true })
	}
	if n := strings.Count(strings.Join(o.made(), " "), "r-b1-"); n != 2 {
		t.Fatalf("branch runs made %d times (%v); want each once", n, o.made())
	}
	mu.Lock()
	reads := fresh
	behind = false
	mu.Unlock()
	if reads != 0 {
		t.Fatalf("the parent read its branches past the cache %d times; want none", reads)
	}

	for _, b := range []string{"r-b1-1", "r-b1-2"} {
		o.drive(t, b, ended)
	}
	if got := o.drive(t, "r", ended).Status; got.Phase != v1alpha1.PhaseSucceeded || got.Output != "report" {
		t.Fatalf("parent %s with output %q; want Succeeded with the writer's report", got.Phase, got.Output)
	}
}
