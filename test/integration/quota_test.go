package integration

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
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

	// pricedTeam is a team on llm: triage hands the work to writer, whose answer ends the run.
	// Each step: 800 prompt tokens, 400 of them cached, and 200 output tokens, which cost
	// 400×0.15 + 400×0.075 + 200×0.60 = 210 millionths of a dollar; the worst case of each call
	// is about 0.0002.
	pricedTeam := func(server *fakes.OpenAI) *v1alpha1.AgentConfig {
		reply := fakes.Reply{Content: "done", Tokens: 1000, PromptTokens: 800, CachedTokens: 400}
		handoff := reply
		handoff.ToolCalls = []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"write it"}`}}
		server.ReplyTo("triage", handoff)
		server.ReplyTo("writer", reply)
		return MakeConfig("priced", ns).Agents(
			endpointAgent("triage", v1alpha1.KindModelEndpoint).HandsOffTo("writer"),
			endpointAgent("writer", v1alpha1.KindModelEndpoint).Terminator(),
		).Obj()
	}
	quotaStatus := func(name string) v1alpha1.AgentQuotaStatus {
		q := &v1alpha1.AgentQuota{}
		ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, q)).To(Succeed())
		return q.Status
	}

	It("holds a started run before a call that would pass the day's cost, whatever the run's limits, and lets it go on when the cap is raised", func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		cfg := pricedTeam(server)
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg,
			quotaNamed(ns, "budget", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("0.0003")}))
		// The run's author asks for far more than the namespace allows, and no maxCost.
		run := MakeRun("spender", ns).Config(cfg.Name).Obj()
		run.Spec.Limits = &v1alpha1.LimitOverrides{MaxSteps: ptr.To[int32](10000), MaxTokens: ptr.To[int64](1_000_000_000), Timeout: ptr.To(v1alpha1.Duration("8760h"))}
		create(run)
		Eventually(func(g Gomega) {
			got := &v1alpha1.AgentRun{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseRunning))
			g.Expect(got.Status.QuotaHold).NotTo(BeNil())
			g.Expect(got.Status.QuotaHold.Quota).To(Equal("budget"))
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonQuotaExceeded))
			g.Expect(c.Message).To(ContainSubstring(`step 2 of agent writer waits: quota "budget": 0.00021 of 0.0003 USD spent today (UTC), and the next model call could cost up to`))
		}, runTimeout, poll).Should(Succeed())
		Expect(server.Requests()).To(HaveLen(1), "the writer's call was not made")
		Eventually(func(g Gomega) {
			st := quotaStatus("budget")
			g.Expect(st.CostToday).To(Equal("0.00021"))
			g.Expect(st.TokensToday).To(BeEquivalentTo(1000))
			g.Expect(st.HeldRuns).To(BeEquivalentTo(1))
		}, runTimeout, poll).Should(Succeed())
		Eventually(func() []string { return eventsOf(run) }).Should(ContainElement(ContainSubstring(`quota "budget"`)))

		// Raising the cap lets it go on; the time it was held counts as waiting.
		q := &v1alpha1.AgentQuota{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "budget"}, q)).To(Succeed())
		q.Spec.MaxCostPerDay = ptr.To("1")
		Expect(k8sClient.Update(ctx, q)).To(Succeed())
		done := waitForEnd(run)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(done.Status.QuotaHold).To(BeNil())
		Expect(done.Status.Waited).NotTo(BeNil())
		Expect(done.Status.Cost).To(Equal("0.00042"))
	})

	It("ends a run whose next call alone could cost more than the day's cap, naming the quota", func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		cfg := pricedTeam(server)
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg,
			quotaNamed(ns, "tight", v1alpha1.AgentQuotaSpec{MaxCostPerDay: ptr.To("0.0001")}))
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCostBudgetExceeded))
		Expect(run.Status.TerminationMessage).To(ContainSubstring(`quota "tight": the next model call could cost up to`))
		Expect(run.Status.TerminationMessage).To(ContainSubstring("more than the 0.0001 USD the namespace may spend today (UTC)"))
		Expect(server.Requests()).To(BeEmpty())
	})

	It("holds runs not started Queued once the day's tokens are used, saying when the day resets", func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		server.ReplyTo("writer", fakes.Reply{Content: "done", Tokens: 1000, PromptTokens: 800, CachedTokens: 400})
		cfg := MakeConfig("priced", ns).Agents(endpointAgent("writer", v1alpha1.KindModelEndpoint).Terminator()).Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg,
			quotaNamed(ns, "budget", v1alpha1.AgentQuotaSpec{MaxTokensPerDay: ptr.To[int64](1000)}))
		spender := MakeRun("spender", ns).Config(cfg.Name).Obj()
		create(spender)
		Expect(waitForEnd(spender).Status.TokensUsed).To(BeEquivalentTo(1000))

		next := MakeRun("next", ns).Config(cfg.Name).Obj()
		create(next)
		reset := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
		waitQueued(next, `quota "budget": 1000 of 1000 tokens used today (UTC); the day resets at `+reset)
		Expect(server.Requests()).To(HaveLen(1), "the queued run made no call")

		// Raising the cap lets it start.
		q := &v1alpha1.AgentQuota{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "budget"}, q)).To(Succeed())
		q.Spec.MaxTokensPerDay = ptr.To[int64](100000)
		Expect(k8sClient.Update(ctx, q)).To(Succeed())
		Expect(waitForEnd(next).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})
})
