package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The webhook's tests run it on a fake API server: a fake client holds what it reads, and its
// SubjectAccessReviews are answered as the API server's RBAC would answer them.

// operatorUser is the operator's own user, as the webhook knows it.
const operatorUser = "system:serviceaccount:baton-system:baton"

// team is the namespace of the tests' runs.
const team = "team-a"

// t0 is when the webhook's clock starts.
var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// rbac says who may do what on the AgentRuns and AgentSessions of namespace team-a: a user, or
// the members of a group ("group:approvers"), may do each verb listed, on every run, or on one
// run only ("get danas"), on every session ("get agentsessions") or on one session only ("get
// agentsessions/chat"). Nobody may do anything else, anywhere else.
type rbac map[string][]string

// sessionResource is the resource of AgentSessions, as grants and SubjectAccessReviews name it.
const sessionResource = "agentsessions"

// apiServer answers the webhook's SubjectAccessReviews.
type apiServer struct {
	rbac rbac
	// down, when set, is the error of every SubjectAccessReview: the API server cannot answer.
	down error
	// asked are the reviews the webhook asked for, in order.
	asked []authorizationv1.SubjectAccessReviewSpec
	// statusUpdate, when set, answers each status update in the store's place; it is given the
	// store, to write the update through, or to write as another client would meanwhile.
	statusUpdate func(ctx context.Context, store client.Client, obj client.Object, opts ...client.SubResourceUpdateOption) error
}

// review answers a SubjectAccessReview as RBAC would.
func (s *apiServer) review(sar *authorizationv1.SubjectAccessReview) error {
	s.asked = append(s.asked, sar.Spec)
	if s.down != nil {
		return s.down
	}
	sar.Status.Allowed = s.allows(sar.Spec)
	if !sar.Status.Allowed {
		sar.Status.Reason = "no RBAC policy matched"
	}
	return nil
}

func (s *apiServer) allows(spec authorizationv1.SubjectAccessReviewSpec) bool {
	attrs := spec.ResourceAttributes
	if attrs == nil || attrs.Group != v1alpha1.GroupVersion.Group || attrs.Subresource != "" || attrs.Namespace != team ||
		attrs.Resource != "agentruns" && attrs.Resource != sessionResource {
		return false
	}
	subjects := []string{spec.User}
	for _, g := range spec.Groups {
		subjects = append(subjects, "group:"+g)
	}
	for _, who := range subjects {
		for _, grant := range s.rbac[who] {
			verb, object, named := strings.Cut(grant, " ")
			resource, name := "agentruns", object
			if r, n, ok := strings.Cut(object, "/"); ok {
				resource, name = r, n
			} else if object == sessionResource {
				resource, named = sessionResource, false
			}
			if verb == attrs.Verb && resource == attrs.Resource && (!named || name == attrs.Name) {
				return true
			}
		}
	}
	return false
}

// testWebhook is the webhook on a fake API server whose RBAC allows what grants lists.
func testWebhook(t *testing.T, grants rbac, objs ...client.Object) *Decisions {
	t.Helper()
	return webhookOn(t, &apiServer{rbac: grants}, objs...)
}

// webhookOn is the webhook on the API server s, which holds objs.
func webhookOn(t *testing.T, s *apiServer, objs ...client.Object) *Decisions {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.AgentSession{}).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				return s.review(sar)
			}
			return c.Create(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if sub == "status" && s.statusUpdate != nil {
				return s.statusUpdate(ctx, c, obj, opts...)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}).Build()
	return &Decisions{Client: c, Self: operatorUser, Clock: clocktesting.NewFakePassiveClock(t0), decoder: admission.NewDecoder(scheme)}
}

// request is the admission request of user's create (old nil) or update of run.
func request(t *testing.T, op admissionv1.Operation, user string, run, old *v1alpha1.AgentRun) admission.Request {
	t.Helper()
	return requestOf(t, op, authenticationv1.UserInfo{Username: user}, run, old)
}

// requestOf is request, from a user with groups and extra attributes.
func requestOf(t *testing.T, op admissionv1.Operation, user authenticationv1.UserInfo, run, old *v1alpha1.AgentRun) admission.Request {
	t.Helper()
	raw := func(r *v1alpha1.AgentRun) runtime.RawExtension {
		if r == nil {
			return runtime.RawExtension{}
		}
		r = r.DeepCopy()
		r.APIVersion, r.Kind = v1alpha1.GroupVersion.String(), "AgentRun"
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req", Operation: op, Namespace: run.Namespace, Name: run.Name,
		UserInfo: user, Object: raw(run), OldObject: raw(old),
	}}
}

// plainRun is a run a person writes.
func plainRun() *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: team, UID: "mine-uid"}}
	run.Spec.ConfigRef.Name = "research"
	run.Spec.Input = "anything"
	return run
}

// admitted is the run as the API server stores it once the webhook admitted req: its object
// with the webhook's patch applied. A refused request stores nothing: nil.
func admitted(t *testing.T, req admission.Request, res admission.Response) *v1alpha1.AgentRun {
	t.Helper()
	if !res.Allowed {
		return nil
	}
	obj := req.Object.Raw
	if len(res.Patches) > 0 {
		ops, err := json.Marshal(res.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if obj, err = patch.Apply(obj); err != nil {
			t.Fatalf("the webhook's patch does not apply: %v", err)
		}
	}
	run := &v1alpha1.AgentRun{}
	if err := json.Unmarshal(obj, run); err != nil {
		t.Fatal(err)
	}
	return run
}

// refusal is what the API server tells the user when the webhook refused the request, else "".
func refusal(res admission.Response) string {
	if res.Allowed {
		return ""
	}
	return res.Result.Message
}

// createAs sends user's create of run through the webhook: the run as stored, nil when refused.
func createAs(t *testing.T, w *Decisions, user string, run *v1alpha1.AgentRun) (*v1alpha1.AgentRun, admission.Response) {
	t.Helper()
	req := request(t, admissionv1.Create, user, run, nil)
	res := w.Handle(context.Background(), req)
	return admitted(t, req, res), res
}

// annotate is user's kubectl annotate of run through the webhook, "key-" removing key: the run
// as stored after it, nil when refused.
func annotate(t *testing.T, w *Decisions, user string, run *v1alpha1.AgentRun, kv ...string) (*v1alpha1.AgentRun, admission.Response) {
	t.Helper()
	return annotateAs(t, w, authenticationv1.UserInfo{Username: user}, run, kv...)
}

// annotateAs is annotate by a user with groups.
func annotateAs(t *testing.T, w *Decisions, user authenticationv1.UserInfo, run *v1alpha1.AgentRun, kv ...string) (*v1alpha1.AgentRun, admission.Response) {
	t.Helper()
	updated := run.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	for len(kv) > 0 {
		if key, ok := strings.CutSuffix(kv[0], "-"); ok {
			delete(updated.Annotations, key)
			kv = kv[1:]
			continue
		}
		updated.Annotations[kv[0]] = kv[1]
		kv = kv[2:]
	}
	req := requestOf(t, admissionv1.Update, user, updated, run)
	res := w.Handle(context.Background(), req)
	return admitted(t, req, res), res
}

// decisionKeys are the annotations people decide with.
var decisionKeys = []string{v1alpha1.AnnotationApprove, v1alpha1.AnnotationReject, v1alpha1.AnnotationReply,
	v1alpha1.AnnotationRevise, v1alpha1.AnnotationFeedback}

// undecided reports whether the run carries none of the annotations people decide with.
func undecided(run *v1alpha1.AgentRun) bool {
	for k := range run.Annotations {
		if slices.Contains(decisionKeys, k) {
			return false
		}
	}
	return true
}
