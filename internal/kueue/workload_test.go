package kueue

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
)

func run(name string, labels map[string]string, priority *int32) *v1alpha1.AgentRun {
	r := &v1alpha1.AgentRun{}
	r.Name, r.Namespace, r.UID, r.Labels = name, "team-a", types.UID("0f6c4a8e-2b1d-4c3e-9a7f-5d2e8b1c0a94"), labels
	r.Spec.Priority = priority
	return r
}

func TestQueueName(t *testing.T) {
	for name, tc := range map[string]struct {
		labels map[string]string
		queue  string
		ok     bool
	}{
		"a run labelled with a queue is Kueue's":    {labels: map[string]string{QueueLabel: "team-a"}, queue: "team-a", ok: true},
		"a run with no labels is not":               {},
		"a run with other labels is not":            {labels: map[string]string{"app": "x"}},
		"a run labelled with an empty queue is not": {labels: map[string]string{QueueLabel: ""}},
	} {
		t.Run(name, func(t *testing.T) {
			queue, ok := QueueName(run("r", tc.labels, nil))
			if queue != tc.queue || ok != tc.ok {
				t.Errorf("QueueName = %q, %v; want %q, %v", queue, ok, tc.queue, tc.ok)
			}
		})
	}
}

func TestWorkloadForAsksForOneRunInItsQueueOwnedByTheRun(t *testing.T) {
	one, zero := resource.MustParse("1"), resource.MustParse("0")
	for name, tc := range map[string]struct {
		ask  Ask
		want kueue.WorkloadSpec
	}{
		"a run without a priority gets Kueue's default": {ask: Ask{Queue: "team-a"}, want: kueue.WorkloadSpec{QueueName: "team-a"}},
		"a run's priority is the Workload's":            {ask: Ask{Queue: "team-a", Priority: ptr.To[int32](-5)}, want: kueue.WorkloadSpec{QueueName: "team-a", Priority: ptr.To[int32](-5)}},
		"a priority class is named on the Workload": {ask: Ask{Queue: "agents", PriorityClass: "low", Priority: ptr.To[int32](10)},
			want: kueue.WorkloadSpec{QueueName: "agents", Priority: ptr.To[int32](10), PriorityClassRef: kueue.NewWorkloadPriorityClassRef("low")}},
	} {
		t.Run(name, func(t *testing.T) {
			r := run("review-42", map[string]string{QueueLabel: "team-a", "app": "x"}, nil)
			spec := tc.want
			spec.PodSets = []kueue.PodSet{{
				Name:  "main",
				Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "agent-run",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{"agents.baton.dev/runs": one, "cpu": zero, "memory": zero},
							Limits:   corev1.ResourceList{"agents.baton.dev/runs": one},
						},
					}},
				}},
			}}
			want := &kueue.Workload{
				TypeMeta: metav1.TypeMeta{APIVersion: "kueue.x-k8s.io/v1beta2", Kind: "Workload"},
				ObjectMeta: metav1.ObjectMeta{
					Name:      WorkloadName(r),
					Namespace: "team-a",
					Labels:    map[string]string{JobUIDLabel: string(r.UID), LabelManagedBy: ManagedBy},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "agents.baton.dev/v1alpha1", Kind: "AgentRun", Name: "review-42", UID: r.UID,
						Controller: ptr.To(true),
					}},
				},
				Spec: spec,
			}
			got := WorkloadFor(r, tc.ask)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("WorkloadFor (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, WorkloadFor(r, tc.ask)); diff != "" {
				t.Errorf("WorkloadFor is not deterministic:\n%s", diff)
			}
			if tc.ask.Priority != nil {
				*tc.ask.Priority++
				if *got.Spec.Priority != *tc.want.Priority {
					t.Error("the Workload shares the ask's priority: a change to one changes the other")
				}
			}
		})
	}
}

func TestARunIsKueuesByWhatItRemembersItsLabelOrItsNamespace(t *testing.T) {
	remembered := run("r", nil, nil)
	remembered.Status.Kueue = &v1alpha1.KueueAdmission{Workload: "agentrun-r-1", Queue: "agents"}
	for name, tc := range map[string]struct {
		run          *v1alpha1.AgentRun
		all          bool
		defaultQueue string
		queue        string
		kueue        bool
	}{
		"a run with neither label nor quota is not Kueue's":                      {run: run("r", nil, nil)},
		"a labelled run is Kueue's, in its label's queue":                        {run: run("r", map[string]string{QueueLabel: "q"}, nil), queue: "q", kueue: true},
		"an unlabelled run of a namespace on Kueue goes to the default queue":    {run: run("r", nil, nil), all: true, defaultQueue: "team-a", queue: "team-a", kueue: true},
		"a run's label wins over the default queue":                              {run: run("r", map[string]string{QueueLabel: "q"}, nil), all: true, defaultQueue: "team-a", queue: "q", kueue: true},
		"a namespace on Kueue with no default queue still holds unlabelled runs": {run: run("r", nil, nil), all: true, kueue: true},
		"a run whose Workload was made stays Kueue's when its label is gone":     {run: remembered, queue: "agents", kueue: true},
	} {
		t.Run(name, func(t *testing.T) {
			queue, ok := Route(tc.run, tc.all, tc.defaultQueue)
			if queue != tc.queue || ok != tc.kueue {
				t.Fatalf("Route = %q, %t; want %q, %t", queue, ok, tc.queue, tc.kueue)
			}
		})
	}
}

func TestARunsPriorityIsClampedToItsNamespacesPriorityClasses(t *testing.T) {
	classes := map[string]int32{"low": 100, "normal": 500}
	for name, tc := range map[string]struct {
		priority *int32
		class    string
		values   map[string]int32
		want     *int32
	}{
		"without listed classes, the run's priority as it was":          {priority: ptr.To[int32](1000000), want: ptr.To[int32](1000000)},
		"without listed classes or a priority, Kueue's default":         {},
		"a priority past the highest class is lowered to it":            {priority: ptr.To[int32](1000000), class: "low", values: classes, want: ptr.To[int32](500)},
		"a priority below the lowest class is raised to it":             {priority: ptr.To[int32](-7), class: "low", values: classes, want: ptr.To[int32](100)},
		"a priority between the classes stays":                          {priority: ptr.To[int32](300), class: "low", values: classes, want: ptr.To[int32](300)},
		"without a priority, the run's class's value":                   {class: "normal", values: classes, want: ptr.To[int32](500)},
		"without a priority or a known class, the lowest class's value": {class: "gone", values: classes, want: ptr.To[int32](100)},
	} {
		t.Run(name, func(t *testing.T) {
			r := run("r", nil, tc.priority)
			got := Priority(r, tc.class, tc.values)
			if !cmp.Equal(got, tc.want) {
				t.Fatalf("Priority = %v, want %v", ptr.Deref(got, -1), ptr.Deref(tc.want, -1))
			}
		})
	}
}

func TestWorkloadName(t *testing.T) {
	long := strings.Repeat("a", 200)
	for name, tc := range map[string]struct {
		run    string
		prefix string
	}{
		"a short name is kept whole":                {run: "review-42", prefix: "agentrun-review-42-"},
		"a long name is cut to fit":                 {run: long, prefix: "agentrun-" + long[:45] + "-"},
		"a cut never leaves a dot before the dash":  {run: strings.Repeat("a", 44) + ".b" + long, prefix: "agentrun-" + strings.Repeat("a", 44) + "-"},
		"a cut never leaves a dash before the dash": {run: strings.Repeat("a", 43) + "--b" + long, prefix: "agentrun-" + strings.Repeat("a", 43) + "-"},
	} {
		t.Run(name, func(t *testing.T) {
			got := WorkloadName(run(tc.run, nil, nil))
			if !strings.HasPrefix(got, tc.prefix) || len(got) != len(tc.prefix)+8 {
				t.Errorf("WorkloadName = %q, want %q and 8 hex digits", got, tc.prefix)
			}
		})
	}
	a, b := run("same", nil, nil), run("same", nil, nil)
	b.UID = "another"
	if WorkloadName(a) == WorkloadName(b) {
		t.Errorf("two runs of the same name, made one after the other, share the Workload %s", WorkloadName(a))
	}
}

// Every run's Workload name is a name the API server takes and a label value, whatever the
// run's name (any valid object name) and UID.
func TestEveryWorkloadNameIsValid(t *testing.T) {
	label := `[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?`
	names := rapid.StringMatching(label + `(\.` + label + `){0,12}`).Filter(func(s string) bool { return len(s) <= 253 })
	rapid.Check(t, func(t *rapid.T) {
		r := run(names.Draw(t, "name"), nil, nil)
		r.UID = types.UID(rapid.String().Draw(t, "uid"))
		got := WorkloadName(r)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Fatalf("WorkloadName(%q) = %q: %v", r.Name, got, errs)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Fatalf("WorkloadName(%q) = %q is not a label value: %v", r.Name, got, errs)
		}
	})
}

func TestCheckQueueName(t *testing.T) {
	for _, ok := range []string{"agents", "team-a.batch", "q1"} {
		if err := CheckQueueName(ok); err != nil {
			t.Errorf("CheckQueueName(%q) = %v, want nil", ok, err)
		}
	}
	// Label values Kueue's LocalQueue names refuse: capitals, underscores, a leading dash.
	for _, bad := range []string{"Agents", "team_a", "-agents", "a..b"} {
		err := CheckQueueName(bad)
		if err == nil || !strings.Contains(err.Error(), `the label kueue.x-k8s.io/queue-name="`+bad+`" names no LocalQueue`) {
			t.Errorf("CheckQueueName(%q) = %v, want the label named as the problem", bad, err)
		}
	}
}
