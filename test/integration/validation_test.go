package integration

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

func valid(ns string) *ConfigWrapper {
	return MakeConfig("team", ns).Agents(
		MakeAgent("lead").HandsOffTo("worker").Script(Says("go").HandOff("worker")),
		MakeAgent("worker").HandsOffTo("lead").Terminator().Script(Says("done")),
	)
}

var _ = Describe("The API server", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("accepts a valid config and fills in the documented defaults", func() {
		cfg := valid(ns).Obj()
		cfg.Spec.Mode = ""
		create(cfg)
		got := &v1alpha1.AgentConfig{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), got)).To(Succeed())
		Expect(got.Spec.Mode).To(Equal(v1alpha1.ModeSwarm))
		Expect(got.Spec.Limits.MaxHandoffs).To(Equal(ptr.To[int32](20)))
		Expect(got.Spec.Limits.MaxSteps).To(Equal(ptr.To[int32](25)))
		Expect(got.Spec.Limits.MaxTokens).To(Equal(ptr.To[int64](50000)))
		Expect(got.Spec.Limits.Timeout).To(HaveValue(BeEquivalentTo("10m")))
		Expect(got.Spec.Limits.AgentTimeout).To(HaveValue(BeEquivalentTo("2m")))
		Expect(got.Spec.LoopDetection.Window).To(Equal(ptr.To[int32](3)))
		Expect(got.Spec.Agents[0].Model.Provider).To(Equal(v1alpha1.ProviderScripted))
	})

	DescribeTable("refuses a config that cannot work, naming the field",
		func(mutate func(c *v1alpha1.AgentConfig), message string) {
			cfg := valid(ns).Obj()
			mutate(cfg)
			err := k8sClient.Create(ctx, cfg)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("an entrypoint that is not an agent",
			func(c *v1alpha1.AgentConfig) { c.Spec.Entrypoint = "ghost" },
			"spec.entrypoint: Invalid value: ghost is not the name of an agent in spec.agents"),
		Entry("a handoff target that is not an agent",
			func(c *v1alpha1.AgentConfig) { c.Spec.Agents[0].Handoffs = []string{"worker", "ghost"} },
			"spec.agents: Invalid value: agents[].handoffs: every handoff target must be the name of an agent in spec.agents"),
		Entry("duplicate agent names",
			func(c *v1alpha1.AgentConfig) { c.Spec.Agents[1].Name = "lead" },
			`spec.agents[1]: Duplicate value: {"name":"lead"}`),
		Entry("a negative limit",
			func(c *v1alpha1.AgentConfig) { c.Spec.Limits.MaxHandoffs = ptr.To[int32](-1) },
			"spec.limits.maxHandoffs: Invalid value: -1: spec.limits.maxHandoffs in body should be greater than or equal to 1"),
		Entry("a zero maxErrors",
			func(c *v1alpha1.AgentConfig) { c.Spec.Limits.MaxErrors = ptr.To[int32](0) },
			"spec.limits.maxErrors: Invalid value: 0"),
		Entry("a state naming an unknown agent",
			func(c *v1alpha1.AgentConfig) {
				c.Spec.Mode = v1alpha1.ModeStateMachine
				c.Spec.States = []v1alpha1.State{{Name: "START", Agent: "ghost"}}
			},
			"spec.states: Invalid value: states[].agent: every state's agent must be the name of an agent in spec.agents"),
		Entry("a transition to an unknown state",
			func(c *v1alpha1.AgentConfig) {
				c.Spec.Mode = v1alpha1.ModeStateMachine
				c.Spec.Signals = []v1alpha1.Signal{{Name: "NEXT"}}
				c.Spec.States = []v1alpha1.State{{Name: "START", Agent: "lead", Transitions: map[string]string{"NEXT": "NOWHERE"}}}
			},
			"spec.states: Invalid value: states[].transitions: every transition (transitions and onError) must lead to a state in spec.states"),
		Entry("a transition on an undeclared signal",
			func(c *v1alpha1.AgentConfig) {
				c.Spec.Mode = v1alpha1.ModeStateMachine
				c.Spec.States = []v1alpha1.State{{Name: "START", Agent: "lead", Transitions: map[string]string{"NEXT": "START"}}}
			},
			"spec.states: Invalid value: states[].transitions: every transition must be keyed by a signal declared in spec.signals"),
		Entry("StateMachine mode without states",
			func(c *v1alpha1.AgentConfig) { c.Spec.Mode = v1alpha1.ModeStateMachine },
			"spec.states: Invalid value: required in StateMachine mode"),
		Entry("a script on an agent that is not Scripted",
			func(c *v1alpha1.AgentConfig) {
				c.Spec.Agents[0].Model = v1alpha1.ModelSpec{Provider: v1alpha1.ProviderOpenAI, Name: "gpt-4o-mini"}
			},
			"spec.agents[0].script: Forbidden: only allowed when model.provider is Scripted"),
		Entry("an agent name that is not a DNS label",
			func(c *v1alpha1.AgentConfig) { c.Spec.Agents[1].Name = "Worker_1"; c.Spec.Agents[0].Handoffs = nil },
			"spec.agents[1].name"),
		Entry("Supervisor mode without routing",
			func(c *v1alpha1.AgentConfig) { c.Spec.Mode = v1alpha1.ModeSupervisor },
			"spec.routing: Required value: required in Supervisor mode"),
	)

	DescribeTable("refuses the old name of transitions, saying it was renamed",
		func(key, message string) {
			cfg := valid(ns).Obj()
			cfg.Spec.Mode = v1alpha1.ModeStateMachine
			cfg.Spec.Signals = []v1alpha1.Signal{{Name: "NEXT"}}
			cfg.Spec.States = []v1alpha1.State{{Name: "START", Agent: "lead"}, {Name: "DONE"}}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{Object: obj}
			states, _, _ := unstructured.NestedSlice(u.Object, "spec", "states")
			states[0].(map[string]any)[key] = map[string]any{"NEXT": "DONE"}
			Expect(unstructured.SetNestedSlice(u.Object, states, "spec", "states")).To(Succeed())
			Expect(k8sClient.Create(ctx, u)).To(MatchError(ContainSubstring(message)))
		},
		Entry("quoted", "on", "spec.states[0].on: Invalid value: on was renamed to transitions"),
		Entry("bare, which YAML 1.1 reads as true", "true",
			"spec.states[0].true: Invalid value: on was renamed to transitions (YAML reads a bare on key as true)"),
	)

	DescribeTable("takes an AgentQuota of any one field, and refuses one of none or a bad value",
		func(spec v1alpha1.AgentQuotaSpec, message string) {
			q := quotaNamed(ns, "q", spec)
			err := k8sClient.Create(ctx, q)
			if message == "" {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("runLimits alone", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{MaxSteps: ptr.To[int32](10)}}, ""),
		Entry("a monthly cost alone", v1alpha1.AgentQuotaSpec{MaxCostPerMonth: ptr.To("900")}, ""),
		Entry("Kueue admission alone", v1alpha1.AgentQuotaSpec{Admission: v1alpha1.AdmissionKueue}, ""),
		Entry("a namespace transcript budget alone", v1alpha1.AgentQuotaSpec{MaxTranscriptBytes: ptr.To[int64](1 << 30)}, ""),
		Entry("nothing (the currency is only a default)", v1alpha1.AgentQuotaSpec{},
			"set at least one of maxRunningRuns, maxCostPerDay"),
		Entry("a currency that is not ISO 4217", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("1"), Currency: ptr.To("usd")}, "spec.currency"),
		Entry("a priority class that is no name", v1alpha1.AgentQuotaSpec{PriorityClasses: []string{"Not A Name"}}, "spec.priorityClasses[0]"),
		Entry("a run timeout of nothing", v1alpha1.AgentQuotaSpec{RunLimits: &v1alpha1.QuotaRunLimits{Timeout: ptr.To(v1alpha1.Duration("0s"))}},
			"spec.runLimits.timeout"),
	)

	It("refuses a malformed duration, naming the field", func() {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(valid(ns).Obj())
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: obj}
		Expect(unstructured.SetNestedField(u.Object, "ten minutes", "spec", "limits", "timeout")).To(Succeed())
		Expect(k8sClient.Create(ctx, u)).To(MatchError(ContainSubstring(`spec.limits.timeout: Invalid value: "ten minutes"`)))
	})

	It("refuses a run with a negative limit override, naming the field", func() {
		run := MakeRun("r", ns).Config("team").MaxTokens(-5).Obj()
		err := k8sClient.Create(ctx, run)
		Expect(err).To(MatchError(ContainSubstring("spec.limits.maxTokens")))
	})

	It("refuses any change of a run's spec, Pending or started, by anyone", func() {
		// A Pending run's creator may not be who edits it: no one may, and a run is recreated
		// instead.
		run := MakeRun("r", ns).Config("not-yet").Input("first").Obj()
		create(run)
		Eventually(func() v1alpha1.RunPhase { return get(run).Status.Phase }, runTimeout, poll).Should(Equal(v1alpha1.PhasePending))
		pending := get(run)
		pending.Spec.ConfigRef.Name = "team"
		Expect(k8sClient.Update(ctx, pending)).To(MatchError(ContainSubstring("spec is immutable: to change a run, create another")))

		create(valid(ns).Obj())
		Expect(k8sClient.Delete(ctx, run)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), &v1alpha1.AgentRun{}))
		}).Should(BeTrue())
		fixed := MakeRun("r", ns).Config("team").Input("first").Obj()
		create(fixed)
		started := waitForEnd(fixed)
		started.Spec.Input = "second"
		Expect(k8sClient.Update(ctx, started)).To(MatchError(ContainSubstring("spec is immutable")))
		Expect(get(fixed).Spec.Input).To(Equal("first"))
	})
})
