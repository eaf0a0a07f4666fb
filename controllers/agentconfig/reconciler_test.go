package agentconfig

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/scripted"
	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

const ns = "team-a"

// ignoreTimes leaves out of a comparison what depends on when a condition changed.
var ignoreTimes = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

// apiServer is a fake API server holding objs, which counts the status writes it took and
// answers each with refuse's error, if it returns one.
type apiServer struct {
	client.Client
	writes int
	refuse func() error
}

func newAPIServer(t *testing.T, objs ...client.Object) *apiServer {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	s := &apiServer{}
	s.Client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.AgentConfig{}).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if s.refuse != nil {
				if err := s.refuse(); err != nil {
					return err
				}
			}
			s.writes++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	return s
}

// thisBuild knows the Scripted provider only.
func thisBuild() *agents.Providers {
	return agents.NewProviders(agents.Dependencies{}, map[v1alpha1.ModelProvider]agents.Factory{v1alpha1.ProviderScripted: scripted.New})
}

// team is a config of two Scripted agents, at generation 3.
func team() *ConfigWrapper {
	w := MakeConfig("team", ns).Agents(
		MakeAgent("lead").HandsOffTo("worker").Script(Says("go").HandOff("worker")),
		MakeAgent("worker").Terminator().Script(Says("done")),
	)
	w.Generation = 3
	return w
}

// conditions are a config's Ready and, when it is not ready, Stalled, at generation 3.
func conditions(ready bool, reason, message string) []metav1.Condition {
	if ready {
		return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: 3}}
	}
	return []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: 3},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: 3},
	}
}

// kstatusOf is what Flux, Argo CD and kubectl's kstatus users read of the config.
func kstatusOf(t *testing.T, cfg *v1alpha1.AgentConfig) status.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "AgentConfig"})
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// A config's status says whether runs can start with it, for its current generation: Ready,
// or Ready False beside Stalled with the fields at fault, which kstatus reads as Failed. It is
// written once when it changes, and not at all when it does not.
func TestAConfigsStatusSaysWhetherRunsCanStartWithIt(t *testing.T) {
	valid := "runs can start with this config"
	lacking := `runs of this config end ConfigInvalid: spec.agents[1].model.provider: Invalid value: "OpenAI": model provider OpenAI is not available in this operator build`
	openAI := func() *v1alpha1.AgentConfig {
		cfg := team().Obj()
		cfg.Spec.Agents[1].Script = nil
		cfg.Spec.Agents[1].Model = v1alpha1.ModelSpec{Provider: v1alpha1.ProviderOpenAI, Name: "gpt-4o-mini"}
		return cfg
	}
	for name, tc := range map[string]struct {
		cfg     *v1alpha1.AgentConfig
		want    v1alpha1.AgentConfigStatus
		writes  int
		kstatus status.Status
	}{
		"a config runs can start with": {cfg: team().Obj(), writes: 1, kstatus: status.CurrentStatus,
			want: v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 3, Conditions: conditions(true, v1alpha1.ReasonValid, valid)}},
		"a config of a provider this build lacks": {cfg: openAI(), writes: 1, kstatus: status.FailedStatus,
			want: v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 3, Conditions: conditions(false, string(v1alpha1.ReasonConfigInvalid), lacking)}},
		"a config whose output schema names a file": {cfg: func() *v1alpha1.AgentConfig {
			cfg := team().Obj()
			cfg.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"$ref": "file:///var/run/secrets/token"}`)}
			return cfg
		}(), writes: 1, kstatus: status.FailedStatus, want: v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 3,
			Conditions: conditions(false, string(v1alpha1.ReasonConfigInvalid),
				`runs of this config end ConfigInvalid: spec.agents[0].outputSchema: Invalid value: refers to file:///var/run/secrets/token: only references inside the schema itself ("#...") resolve; Baton never reads a file or fetches a URL for a schema`)}},
		"a config fixed since runs could not start with it": {cfg: func() *v1alpha1.AgentConfig {
			cfg := team().Obj()
			cfg.Status = v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 2, Conditions: conditions(false, string(v1alpha1.ReasonConfigInvalid), lacking)}
			return cfg
		}(), writes: 1, kstatus: status.CurrentStatus,
			want: v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 3, Conditions: conditions(true, v1alpha1.ReasonValid, valid)}},
		"a config whose status is current": {cfg: func() *v1alpha1.AgentConfig {
			cfg := team().Obj()
			cfg.Status = v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 3, Conditions: conditions(true, v1alpha1.ReasonValid, valid)}
			return cfg
		}(), writes: 0, kstatus: status.CurrentStatus,
			want: v1alpha1.AgentConfigStatus{Agents: 2, ObservedGeneration: 3, Conditions: conditions(true, v1alpha1.ReasonValid, valid)}},
	} {
		t.Run(name, func(t *testing.T) {
			s := newAPIServer(t, tc.cfg)
			r := &Reconciler{Client: s, Providers: thisBuild()}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.cfg)}); err != nil {
				t.Fatal(err)
			}
			got := &v1alpha1.AgentConfig{}
			if err := s.Get(context.Background(), client.ObjectKeyFromObject(tc.cfg), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Status, ignoreTimes); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if s.writes != tc.writes {
				t.Errorf("%d status writes; want %d", s.writes, tc.writes)
			}
			if k := kstatusOf(t, got); k != tc.kstatus {
				t.Errorf("kstatus %s; want %s", k, tc.kstatus)
			}
		})
	}
}

// A config deleted before its status could be written is no error; any other refusal of the
// write is, so that the config is looked at again.
func TestAConfigsStatusWriteIsRetriedUnlessTheConfigIsGone(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "agentconfigs"}, "team")
	busy := errors.New("the server is currently unable to handle the request")
	for name, tc := range map[string]struct {
		objs   []client.Object
		refuse error
		fails  bool
	}{
		"a config that no longer exists":                {},
		"a config deleted before its status is written": {objs: []client.Object{team().Obj()}, refuse: gone},
		"a status write the API server refuses":         {objs: []client.Object{team().Obj()}, refuse: busy, fails: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := newAPIServer(t, tc.objs...)
			s.refuse = func() error { return tc.refuse }
			r := &Reconciler{Client: s, Providers: thisBuild()}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "team"}})
			if (err != nil) != tc.fails {
				t.Fatalf("error %v; want one: %t", err, tc.fails)
			}
		})
	}
}
