package agentrun

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	. "github.com/baton-dev/baton/test/builders"
)

// gated is relay's first two agents with a gate after a: b runs once someone approves.
func gated() *v1alpha1.AgentConfig {
	return MakeConfig("gated", ns).Agents(
		MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b").Tokens(100)),
		MakeAgent("b").Terminator().Script(Says("done").Tokens(100)),
	).Gate("review", "a", 1).Obj()
}

// queued is the run's annotations with the decisions queued, as the webhook queues them.
func queued(t *testing.T, run *v1alpha1.AgentRun, ds ...decisions.Queued) {
	t.Helper()
	for i, d := range ds {
		d.Seq, d.Time = int64(i+1), metav1.NewTime(time.Now())
		var err error
		if run.Annotations, err = decisions.Add(run.Annotations, d, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTheReconcileProtocol drives runs through the reconciler on a fake API server, as its
// watches would, and checks what a user sees of them: how they end, what they used, and how
// many status writes it took.
func TestTheReconcileProtocol(t *testing.T) {
	for name, tc := range map[string]struct {
		config *v1alpha1.AgentConfig
		// others are objects in the cluster beside the run; the config is not, with missing.
		others  []client.Object
		missing bool
		batch   time.Duration
		// conflicts is how many status writes the API server refuses with a conflict first.
		conflicts int
		// at, when set, is done to the run once it is as at says, and the run driven on.
		at    func(*v1alpha1.AgentRun) bool
		then  func(t *testing.T, o *operator)
		phase v1alpha1.RunPhase
		// reason, steps and tokens are the run's end; writes bounds its status writes that the
		// API server took.
		reason    v1alpha1.TerminationReason
		steps     int32
		tokens    int64
		minWrites int
		maxWrites int
	}{
		"every step written, the start with the first": {
			config: relay(), reason: v1alpha1.ReasonCompleted, steps: 5, tokens: 500, minWrites: 5, maxWrites: 5,
		},
		"steps batched: the run is written once it ends": {
			config: relay(), batch: time.Hour, reason: v1alpha1.ReasonCompleted, steps: 5, tokens: 500, minWrites: 1, maxWrites: 1,
		},
		"a write that loses a race is decided again on a fresh copy, and loses nothing": {
			config: relay(), conflicts: 2, reason: v1alpha1.ReasonCompleted, steps: 5, tokens: 500, minWrites: 5, maxWrites: 5,
		},
		"a run waits at its gate, and the decisions queued are applied in order": {
			config: gated(),
			at:     func(r *v1alpha1.AgentRun) bool { return r.Status.Phase == v1alpha1.PhaseAwaitingApproval },
			then: func(t *testing.T, o *operator) {
				run := o.run(t, "r")
				queued(t, run, decisions.Queued{Action: decisions.Reject, Gate: "review", By: "bob"},
					decisions.Queued{Action: decisions.Approve, Gate: "review", By: "carol"})
				if err := o.Update(context.Background(), run); err != nil {
					t.Fatal(err)
				}
			},
			reason: v1alpha1.ReasonRejected, steps: 1, tokens: 100, minWrites: 2, maxWrites: 2,
		},
		"an approval at the gate takes the run on": {
			config: gated(),
			at:     func(r *v1alpha1.AgentRun) bool { return r.Status.Phase == v1alpha1.PhaseAwaitingApproval },
			then: func(t *testing.T, o *operator) {
				run := o.run(t, "r")
				queued(t, run, decisions.Queued{Action: decisions.Approve, Gate: "review", By: "carol"})
				if err := o.Update(context.Background(), run); err != nil {
					t.Fatal(err)
				}
			},
			reason: v1alpha1.ReasonCompleted, steps: 2, tokens: 200, minWrites: 3, maxWrites: 3,
		},
		"a cancel ends a waiting run at once": {
			config: gated(),
			at:     func(r *v1alpha1.AgentRun) bool { return r.Status.Phase == v1alpha1.PhaseAwaitingApproval },
			then: func(t *testing.T, o *operator) {
				run := o.run(t, "r")
				run.Annotations = mergeAnnotation(run.Annotations, v1alpha1.AnnotationCancel, "not needed")
				if err := o.Update(context.Background(), run); err != nil {
					t.Fatal(err)
				}
			},
			reason: v1alpha1.ReasonCancelled, steps: 1, tokens: 100, minWrites: 2, maxWrites: 2,
		},
		"a run waits Pending for its config, and starts once it exists": {
			config: relay(), missing: true,
			at: func(r *v1alpha1.AgentRun) bool {
				return r.Status.Phase == v1alpha1.PhasePending && waitsFor(r, v1alpha1.ConditionConfigResolved, v1alpha1.ReasonConfigNotFound)
			},
			then: func(t *testing.T, o *operator) {
				if err := o.Create(context.Background(), relay()); err != nil {
					t.Fatal(err)
				}
			},
			reason: v1alpha1.ReasonCompleted, steps: 5, tokens: 500, minWrites: 6, maxWrites: 6,
		},
		"a run its quota holds waits Queued, and starts once the quota is raised": {
			config: relay(), others: []client.Object{maxRunning(0)},
			at: func(r *v1alpha1.AgentRun) bool {
				return r.Status.Phase == v1alpha1.PhaseQueued && waitsFor(r, v1alpha1.ConditionProgressing, v1alpha1.ReasonQuotaExceeded)
			},
			then: func(t *testing.T, o *operator) {
				q := maxRunning(1)
				if err := o.Get(context.Background(), client.ObjectKeyFromObject(q), q); err != nil {
					t.Fatal(err)
				}
				q.Spec.MaxRunningRuns = ptr.To[int32](1)
				if err := o.Update(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			},
			reason: v1alpha1.ReasonCompleted, steps: 5, tokens: 500, minWrites: 6, maxWrites: 6,
		},
		"a run whose Kueue queue no LocalQueue can have ends": {
			config: relay(), others: []client.Object{kueueQuota()},
			reason: v1alpha1.ReasonConfigInvalid, minWrites: 1, maxWrites: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			run := MakeRun("r", ns).Config(tc.config.Name).Input("go").Obj()
			run.UID = types.UID("uid-r")
			objs := append([]client.Object{run}, tc.others...)
			if !tc.missing {
				objs = append(objs, tc.config)
			}
			o := newOperator(t, objs...)
			o.r.StatusBatchPeriod = tc.batch
			left := tc.conflicts
			if left > 0 {
				o.r.Client = conflicting(o.cluster.Client, &left)
			}
			if tc.at != nil {
				o.drive(t, "r", tc.at)
				tc.then(t, o)
			}
			got := o.drive(t, "r", ended).Status
			if got.TerminationReason != tc.reason || got.StepCount != tc.steps || got.TokensUsed != tc.tokens {
				t.Errorf("ended %s after %d steps and %d tokens (%s); want %s after %d and %d",
					got.TerminationReason, got.StepCount, got.TokensUsed, got.TerminationMessage, tc.reason, tc.steps, tc.tokens)
			}
			if w := o.writes("r"); w < tc.minWrites || w > tc.maxWrites {
				t.Errorf("%d status writes; want %d to %d", w, tc.minWrites, tc.maxWrites)
			}
			if left > 0 {
				t.Errorf("%d of %d conflicts never met", left, tc.conflicts)
			}
		})
	}
}

// waitsFor reports whether the run's condition typ says reason.
func waitsFor(run *v1alpha1.AgentRun, typ, reason string) bool {
	c := meta.FindStatusCondition(run.Status.Conditions, typ)
	return c != nil && c.Reason == reason
}

// maxRunning is an AgentQuota of the namespace that lets n runs run at once.
func maxRunning(n int32) *v1alpha1.AgentQuota {
	return &v1alpha1.AgentQuota{ObjectMeta: metav1.ObjectMeta{Name: "runs", Namespace: ns},
		Spec: v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To(n)}}
}

// kueueQuota is an AgentQuota that sends the namespace's runs through Kueue, to a queue name no
// LocalQueue can have.
func kueueQuota() *v1alpha1.AgentQuota {
	return &v1alpha1.AgentQuota{ObjectMeta: metav1.ObjectMeta{Name: "kueue", Namespace: ns},
		Spec: v1alpha1.AgentQuotaSpec{Admission: v1alpha1.AdmissionKueue, DefaultQueue: ptr.To("Not_A_Name")}}
}

// conflicting is c, whose first *n status writes the API server refuses with a conflict, as it
// does when another writer got there first.
func conflicting(c client.Client, n *int) client.Client {
	return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if *n > 0 {
				*n--
				return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "agentruns"}, obj.GetName(), nil)
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}
