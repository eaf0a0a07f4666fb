package modelendpoint

import (
	"context"
	"errors"
	"net/http"
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
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/pacing"
)

var t0 = time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)

// ignoreTimes leaves out of a comparison what depends on when a condition changed.
var ignoreTimes = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

// endpointSpec is an OpenAI-compatible endpoint with gpt-4o-mini's prices and limits
// (requests and tokens a minute, calls at once; 0 is none).
func endpointSpec(rpm, tpm int64, concurrent int32) v1alpha1.ModelEndpointSpec {
	spec := v1alpha1.ModelEndpointSpec{Provider: v1alpha1.ProviderOpenAI, URL: "https://llm.example.com/v1",
		Prices: []v1alpha1.ModelPrice{{Model: "gpt-4o-mini", Input: "0.15", Output: "0.60"}}}
	if rpm > 0 || tpm > 0 || concurrent > 0 {
		spec.Limits = &v1alpha1.EndpointLimits{}
	}
	if rpm > 0 {
		spec.Limits.RequestsPerMinute = ptr.To(rpm)
	}
	if tpm > 0 {
		spec.Limits.TokensPerMinute = ptr.To(tpm)
	}
	if concurrent > 0 {
		spec.Limits.MaxConcurrent = ptr.To(concurrent)
	}
	return spec
}

// namespacedEndpoint is the ModelEndpoint llm of team-a, at generation 2.
func namespacedEndpoint(spec v1alpha1.ModelEndpointSpec) *v1alpha1.ModelEndpoint {
	e := &v1alpha1.ModelEndpoint{Spec: spec}
	e.Name, e.Namespace, e.Generation = "llm", "team-a", 2
	return e
}

// keyOf is the pacer's key of an endpoint.
func keyOf(obj client.Object) pacing.Key {
	if obj.GetNamespace() == "" {
		return pacing.Key{Kind: string(v1alpha1.KindClusterModelEndpoint), Name: obj.GetName()}
	}
	return pacing.Key{Kind: string(v1alpha1.KindModelEndpoint), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// operator is the reconciler on a fake API server holding objs, with a pacer on a fake clock;
// writes counts the status writes the API server took.
type operator struct {
	r      *Reconciler
	c      client.Client
	pacer  *pacing.Pacer
	writes int
}

func newOperator(t *testing.T, objs ...client.Object) *operator {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	o := &operator{pacer: pacing.New(clocktesting.NewFakeClock(t0))}
	o.c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.ModelEndpoint{}, &v1alpha1.ClusterModelEndpoint{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				o.writes++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	o.r = &Reconciler{Client: o.c, Pacer: o.pacer, Endpoints: &endpoints.Resolver{Reader: o.c}}
	return o
}

// reconcile reconciles obj and returns its status as stored after.
func (o *operator) reconcile(t *testing.T, obj client.Object) (v1alpha1.ModelEndpointStatus, ctrl.Result) {
	t.Helper()
	res, err := o.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetNamespace() == "" {
		got := &v1alpha1.ClusterModelEndpoint{}
		if err := o.c.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		return got.Status, res
	}
	got := &v1alpha1.ModelEndpoint{}
	if err := o.c.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	return got.Status, res
}

// ready is an endpoint's Ready condition at generation 2.
func ready(ok bool, reason, message string) []metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: 2}
	if !ok {
		c.Status = metav1.ConditionFalse
	}
	return []metav1.Condition{c}
}

// busy makes calls on the endpoint as steps would: two calls of 500 tokens, the first turned
// away with a 429 that names the server's limit of 100 requests a minute, the second still in
// flight; then a third waits for the pause the 429 began.
func busy(t *testing.T, e *pacing.Endpoint) {
	t.Helper()
	ask := pacing.Ask{Namespace: "team-a", Run: "team-a/r", Tokens: 500}
	first, err := e.Acquire(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Acquire(context.Background(), ask); err != nil {
		t.Fatal(err)
	}
	first.Done(0, pacing.ReadSignal(http.StatusTooManyRequests, http.Header{"X-Ratelimit-Limit-Requests": {"100"}}, t0))
	e.Enqueue(ask, func(*pacing.Grant) { t.Error("a call was granted while the server asked everyone to wait") })
}

// An endpoint's status says what the pacer saw of its use (calls and tokens in the last
// minute, calls in flight and waiting, 429s), the limits in effect (the configured ones, lowered
// by what the server reports) and whether steps on it can work; it is written when that
// changed, and looked at again sooner while the endpoint is busy.
func TestAnEndpointsStatusSaysWhatThePacerSaw(t *testing.T) {
	usable := ready(true, v1alpha1.ReasonValid, "agents may use this endpoint")
	limits := &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To[int64](600), TokensPerMinute: ptr.To[int64](100000), MaxConcurrent: ptr.To[int32](4)}
	badPrices := endpointSpec(0, 0, 0)
	badPrices.Prices[0].Input = "cheap"
	cluster := &v1alpha1.ClusterModelEndpoint{Spec: endpointSpec(600, 100000, 4)}
	cluster.Name, cluster.Generation = "shared", 2
	current := namespacedEndpoint(endpointSpec(600, 100000, 4))
	current.Status = v1alpha1.ModelEndpointStatus{ObservedGeneration: 2, EffectiveLimits: limits, Conditions: usable}
	for name, tc := range map[string]struct {
		obj    client.Object
		use    func(*testing.T, *pacing.Endpoint)
		want   v1alpha1.ModelEndpointStatus
		writes int
		every  time.Duration
	}{
		"an idle endpoint with limits": {obj: namespacedEndpoint(endpointSpec(600, 100000, 4)), writes: 1, every: idleEvery,
			want: v1alpha1.ModelEndpointStatus{ObservedGeneration: 2, EffectiveLimits: limits, Conditions: usable}},
		"an idle endpoint without limits": {obj: namespacedEndpoint(endpointSpec(0, 0, 0)), writes: 1, every: idleEvery,
			want: v1alpha1.ModelEndpointStatus{ObservedGeneration: 2, Conditions: usable}},
		"a busy endpoint the server turned a call away from": {obj: namespacedEndpoint(endpointSpec(600, 100000, 4)), use: busy, writes: 1, every: busyEvery,
			want: v1alpha1.ModelEndpointStatus{ObservedGeneration: 2, RequestsLastMinute: 2, TokensLastMinute: 500, InFlight: 1, Waiting: 1, RateLimited: 1,
				EffectiveLimits: &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To[int64](100), TokensPerMinute: ptr.To[int64](100000), MaxConcurrent: ptr.To[int32](4)},
				Conditions:      usable}},
		"an endpoint whose prices cannot be read": {obj: namespacedEndpoint(badPrices), writes: 1, every: idleEvery,
			want: v1alpha1.ModelEndpointStatus{ObservedGeneration: 2, Conditions: ready(false, "Invalid",
				`steps on this endpoint fail: ModelEndpoint llm: spec.prices[0].input: "cheap" is not a decimal number: 'c' is not a digit or a point (write digits such as "2.50")`)}},
		"a ClusterModelEndpoint": {obj: cluster, use: busy, writes: 1, every: busyEvery,
			want: v1alpha1.ModelEndpointStatus{ObservedGeneration: 2, RequestsLastMinute: 2, TokensLastMinute: 500, InFlight: 1, Waiting: 1, RateLimited: 1,
				EffectiveLimits: &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To[int64](100), TokensPerMinute: ptr.To[int64](100000), MaxConcurrent: ptr.To[int32](4)},
				Conditions:      usable}},
		"an endpoint whose status is current": {obj: current, writes: 0, every: idleEvery, want: current.Status},
	} {
		t.Run(name, func(t *testing.T) {
			o := newOperator(t, tc.obj)
			if tc.use != nil {
				var spec v1alpha1.ModelEndpointSpec
				switch e := tc.obj.(type) {
				case *v1alpha1.ModelEndpoint:
					spec = e.Spec
				case *v1alpha1.ClusterModelEndpoint:
					spec = e.Spec
				}
				tc.use(t, o.pacer.Endpoint(keyOf(tc.obj), endpoints.Limits(spec.Limits)))
			}
			got, res := o.reconcile(t, tc.obj)
			if diff := cmp.Diff(tc.want, got, ignoreTimes); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if o.writes != tc.writes || res.RequeueAfter != tc.every {
				t.Errorf("%d writes, looked at again after %s; want %d, after %s", o.writes, res.RequeueAfter, tc.writes, tc.every)
			}
		})
	}
}

// The pacer takes an endpoint's limits from its spec: raised, they let the calls waiting for
// them through at once. An endpoint deleted is forgotten: its waiting calls are released with
// an error rather than left waiting for capacity that will never come.
func TestThePacerFollowsTheEndpointsSpec(t *testing.T) {
	e := namespacedEndpoint(endpointSpec(0, 0, 1))
	o := newOperator(t, e)
	o.reconcile(t, e)
	paced := o.pacer.Endpoint(keyOf(e), endpoints.Limits(e.Spec.Limits))
	ask := pacing.Ask{Namespace: "team-a", Run: "team-a/r", Tokens: 10}
	if _, err := paced.Acquire(context.Background(), ask); err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 2)
	paced.Enqueue(ask, func(g *pacing.Grant) { granted <- g.Err() })
	paced.Enqueue(ask, func(g *pacing.Grant) { granted <- g.Err() })
	if st, _ := o.reconcile(t, e); st.InFlight != 1 || st.Waiting != 2 {
		t.Fatalf("status %+v; want one call in flight and two waiting, at one call at once", st)
	}
	// released is what the waiting call the reconcile let go was told; it fails when none was.
	released := func(after string) error {
		t.Helper()
		select {
		case err := <-granted:
			return err
		default:
			t.Fatalf("no waiting call was let go after %s", after)
			return nil
		}
	}

	raised := &v1alpha1.ModelEndpoint{}
	if err := o.c.Get(context.Background(), client.ObjectKeyFromObject(e), raised); err != nil {
		t.Fatal(err)
	}
	raised.Spec.Limits.MaxConcurrent = ptr.To[int32](2)
	if err := o.c.Update(context.Background(), raised); err != nil {
		t.Fatal(err)
	}
	o.reconcile(t, raised)
	if err := released("the limit was raised"); err != nil {
		t.Fatalf("a waiting call was released with %v; want it granted once the limit was raised", err)
	}

	if err := o.c.Delete(context.Background(), raised); err != nil {
		t.Fatal(err)
	}
	if _, err := o.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)}); err != nil {
		t.Fatal(err)
	}
	if err := released("the endpoint was deleted"); !errors.Is(err, pacing.ErrForgotten) {
		t.Fatalf("the call still waiting was released with %v; want %v", err, pacing.ErrForgotten)
	}
}
