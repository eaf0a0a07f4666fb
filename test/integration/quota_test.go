package integration

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// waitQueued waits for the run to be Queued with a Progressing message that says msg.
func waitQueued(run *v1alpha1.AgentRun, msg string) *v1alpha1.AgentRun {
	out := &v1alpha1.AgentRun{}
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), out)).To(Succeed())
		g.Expect(out.Status.Phase).To(Equal(v1alpha1.PhaseQueued))
		c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonQuotaExceeded))
		g.Expect(c.Message).To(ContainSubstring(msg))
	}, runTimeout, poll).Should(Succeed())
	return out
}

func quotaNamed(ns, name string, spec v1alpha1.AgentQuotaSpec) *v1alpha1.AgentQuota {
	q := &v1alpha1.AgentQuota{Spec: spec}
	q.Name, q.Namespace = name, ns
	return q
}

var _ = Describe("An AgentQuota", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// gated runs wait at a gate after writer: a run waiting for people counts as running.
	gated := func() *v1alpha1.AgentConfig {
		return MakeConfig("gated", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).Obj()
	}

	It("holds runs past maxRunningRuns Queued, in order of priority then creation, and starts them as places free", func() {
		cfg := gated()
		create(quotaNamed(ns, "team-a", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](1)}), cfg)
		first := MakeRun("first", ns).Config(cfg.Name).Obj()
		create(first)
		waitForGate(first, "review", 1)

		low := MakeRun("low", ns).Config(cfg.Name).Obj()
		create(low)
		waitQueued(low, `quota "team-a": 1 of 1 runs running; place 1 of 1 in line`)
		high := MakeRun("high", ns).Config(cfg.Name).Obj()
		high.Spec.Priority = ptr.To[int32](5)
		later := MakeRun("later", ns).Config(cfg.Name).Obj()
		create(high, later)
		waitQueued(high, "place 1 of ")
		Eventually(func(g Gomega) {
			q := &v1alpha1.AgentQuota{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team-a"}, q)).To(Succeed())
			g.Expect(q.Status.Running).To(BeEquivalentTo(1))
			g.Expect(q.Status.Queued).To(BeEquivalentTo(3))
			g.Expect(q.Status.ResetTime).NotTo(BeNil())
			c := meta.FindStatusCondition(q.Status.Conditions, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}, runTimeout, poll).Should(Succeed())
		Eventually(func() []string { return eventsOf(low) }).Should(ContainElement(ContainSubstring(`quota "team-a"`)))

		// A queued run can be cancelled, and leaves the line.
		Expect(annotate(k8sClient, later, v1alpha1.AnnotationCancel, "not needed")).To(Succeed())
		Expect(waitForEnd(later).Status.TerminationReason).To(Equal(v1alpha1.ReasonCancelled))

		// The first run ends: the high-priority run, created after low, starts before it.
		Expect(annotate(alice, first, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(first).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		waitForGate(high, "review", 1)
		Expect(get(low).Status.Phase).To(Equal(v1alpha1.PhaseQueued))

		Expect(annotate(alice, high, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		waitForEnd(high)
		waitForGate(low, "review", 1)
		Expect(annotate(alice, low, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(low).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})

	It("holds every run once the day's cost is spent, saying when the day resets", func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		server.ReplyTo("writer", fakes.Reply{Content: "done", Tokens: 1000, PromptTokens: 800, CachedTokens: 400})
		cfg := MakeConfig("priced", ns).Agents(endpointAgent("writer", v1alpha1.KindModelEndpoint).Terminator()).Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg,
			quotaNamed(ns, "budget", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("0.0002")}))
		spender := MakeRun("spender", ns).Config(cfg.Name).Obj()
		create(spender)
		Expect(waitForEnd(spender).Status.Cost).To(Equal("0.00021"))

		next := MakeRun("next", ns).Config(cfg.Name).Obj()
		create(next)
		reset := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
		waitQueued(next, `quota "budget": 0.00021 of 0.0002 spent today (UTC); the day resets at `+reset)
		Eventually(func(g Gomega) {
			q := &v1alpha1.AgentQuota{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "budget"}, q)).To(Succeed())
			g.Expect(q.Status.CostToday).To(Equal("0.00021"))
			g.Expect(q.Status.TokensToday).To(BeEquivalentTo(1000))
		}, runTimeout, poll).Should(Succeed())
		Expect(server.Requests()).To(HaveLen(1), "the queued run made no call")

		// Raising the cap lets it start.
		q := &v1alpha1.AgentQuota{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "budget"}, q)).To(Succeed())
		q.Spec.MaxCostPerDay = ptr.To("1")
		Expect(k8sClient.Update(ctx, q)).To(Succeed())
		Expect(waitForEnd(next).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})
})
