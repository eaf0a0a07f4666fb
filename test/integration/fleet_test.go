package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/shopspring/decimal"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// endpointAgent is an agent on the model endpoint llm, with model gpt-4o-mini.
func endpointAgent(name string, kind v1alpha1.EndpointKind) *AgentWrapper {
	a := MakeAgent(name)
	a.Model.Provider = ""
	a.Model.Name = "gpt-4o-mini"
	a.Model.EndpointRef = &v1alpha1.EndpointReference{Kind: kind, Name: "llm"}
	a.Model.MaxOutputTokens = ptr.To[int32](200)
	a.Description = name + " work"
	return a
}

// modelEndpoint is the ModelEndpoint llm on server, with its key in Secret llm and
// gpt-4o-mini's prices.
func modelEndpoint(ns string, server *fakes.OpenAI, rpm int64) *v1alpha1.ModelEndpoint {
	e := &v1alpha1.ModelEndpoint{Spec: v1alpha1.ModelEndpointSpec{
		Provider: v1alpha1.ProviderOpenAI, URL: server.BaseURL(),
		APIKeySecretRef: &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"},
		Prices:          []v1alpha1.ModelPrice{{Model: "gpt-4o-mini", Input: "0.15", CachedInput: "0.075", Output: "0.60"}},
	}}
	if rpm > 0 {
		e.Spec.Limits = &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To(rpm)}
	}
	e.Name, e.Namespace = "llm", ns
	return e
}

var _ = Describe("Runs on a shared model endpoint", func() {
	var ns string
	var server *fakes.OpenAI
	BeforeEach(func() {
		ns = newNamespace()
		server = fakes.NewOpenAI()
		DeferCleanup(server.Close)
	})

	// Each step: 800 prompt tokens, 400 of them cached, and 200 output tokens:
	// 400×0.15 + 400×0.075 + 200×0.60 = 210 millionths of a dollar.
	pricedReply := fakes.Reply{Content: "done", Tokens: 1000, PromptTokens: 800, CachedTokens: 400}

	// pricedTeam is a team on llm: triage hands the work to writer, whose answer ends the run.
	// The server answers triage with pricedReply's usage and the handoff.
	pricedTeam := func(name string) *v1alpha1.AgentConfig {
		server.ReplyTo("triage", fakes.Reply{Content: "to the writer", Tokens: 1000, PromptTokens: 800, CachedTokens: 400,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"write it"}`}}})
		return MakeConfig(name, ns).Agents(
			endpointAgent("triage", v1alpha1.KindModelEndpoint).HandsOffTo("writer"),
			endpointAgent("writer", v1alpha1.KindModelEndpoint).Terminator(),
		).Obj()
	}

	It("cost what their endpoint's prices say, exactly, step by step", func() {
		cfg := pricedTeam("priced")
		server.ReplyTo("writer", pricedReply)
		run := MakeRun("r", ns).Config(cfg.Name).Input("an invoice").Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Cost).To(Equal("0.00042"))
		Expect(run.Status.Currency).To(Equal("USD"))
		Expect(run.Status.HandoffSequence).To(HaveLen(2))
		Expect(run.Status.HandoffSequence[0].Cost).To(Equal("0.00021"))
		Expect(server.Requests()[0].Header.Get("Authorization")).To(Equal("Bearer " + fakeKey))
	})

	It("do not make a call whose worst case could pass the run's maxCost, and end CostBudgetExceeded", func() {
		cfg := pricedTeam("budgeted")
		cfg.Spec.Limits.MaxCost = ptr.To("0.00022")
		server.ReplyTo("writer", pricedReply)
		run := MakeRun("r", ns).Config(cfg.Name).Input("an invoice").Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCostBudgetExceeded), run.Status.TerminationMessage)
		Expect(run.Status.TerminationMessage).To(HavePrefix("cost budget: 0.00021 of 0.00022 USD spent; the next model call could cost up to "))
		Expect(run.Status.Cost).To(Equal("0.00021"), "the writer's call was not made, so it cost nothing")
		Expect(server.Requests()).To(HaveLen(1))
		c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionCostBudgetWarning)
		Expect(c).NotTo(BeNil(), "95% of the budget is spent after the first step")
		Expect(c.Message).To(Equal("cost budget: 0.00021 of 0.00022 USD spent (95%), past the warning at 90%"))
	})

	It("ask for no more output than the run's budget can pay for", func() {
		cfg := pricedTeam("capped")
		cfg.Spec.Limits.MaxCost = ptr.To("0.00025")
		server.ReplyTo("writer", fakes.Reply{Content: "done", Tokens: 60, PromptTokens: 50}) // 50×0.15 + 10×0.60 millionths
		run := MakeRun("r", ns).Config(cfg.Name).Input("an invoice").Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		sent := server.Requests()
		Expect(sent).To(HaveLen(2))
		Expect(sent[0].MaxCompletionTokens).To(BeEquivalentTo(200), "the budget could pay for the agent's own cap")
		Expect(sent[1].MaxCompletionTokens).To(And(BeNumerically(">=", 16), BeNumerically("<", 200)),
			"the writer's cap was not lowered to what the 0.00004 left can pay for")
		Expect(run.Status.Cost).To(Equal("0.0002235"))
	})

	It("end with the wrap-up agent's answer when the budget runs out, its turn paid from a reserve kept for it", func() {
		// triage and researcher hand the work back and forth until the budget runs low, their
		// output caps lowered as it does; writer wraps up. Each of their steps: 50 prompt and 10
		// output tokens, 13.5 millionths.
		server.ReplyTo("triage", fakes.Reply{Content: "more research", Tokens: 60, PromptTokens: 50,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_researcher", Args: `{"reason":"dig"}`}}})
		server.ReplyTo("researcher", fakes.Reply{Content: "found more", Tokens: 60, PromptTokens: 50,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_triage", Args: `{"reason":"look"}`}}})
		server.ReplyTo("writer", fakes.Reply{Content: "the summary", Tokens: 150, PromptTokens: 100})
		cfg := MakeConfig("wraps", ns).Agents(
			endpointAgent("triage", v1alpha1.KindModelEndpoint).HandsOffTo("researcher"),
			endpointAgent("researcher", v1alpha1.KindModelEndpoint).HandsOffTo("triage"),
			endpointAgent("writer", v1alpha1.KindModelEndpoint).Terminator(),
		).MaxCost("0.0004").WrapUp("writer").
			LoopDetection(nil, nil, ptr.To[int32](25), ptr.To[int32](50), ptr.To[int32](50)).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("a survey").Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 0), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonWrappedUp), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("the summary"))
		Expect(run.Status.TerminationMessage).To(And(HavePrefix("writer wrapped up the run after a limit ran out (cost budget: "),
			ContainSubstring("is kept for writer's wrap-up turn")))
		Expect(run.Status.WrappingUp).NotTo(BeNil())
		Expect(run.Status.WrappingUp.Limit).To(Equal(v1alpha1.ReasonCostBudgetExceeded))
		spent, err := decimal.NewFromString(run.Status.Cost)
		Expect(err).NotTo(HaveOccurred())
		Expect(spent.LessThanOrEqual(decimal.RequireFromString("0.0004"))).To(BeTrue(), "spent %s of 0.0004", spent)
		sent := server.Requests()
		last := sent[len(sent)-1]
		Expect(last.Tools).To(BeEmpty(), "the wrap-up turn offers no handoffs and no tools")
		Expect(last.Messages[len(last.Messages)-1].Content).To(ContainSubstring("This is its last turn"))
		Expect(last.MaxCompletionTokens).To(BeEquivalentTo(200), "the reserve paid for the writer's whole cap")
	})

	It("share the endpoint's rate limit, wait when the server answers 429, and none fails for it", func() {
		// The server takes 10 calls per 2 s, the endpoint says 600 a minute: the first burst
		// passes the server's limit, and its 429s send the steps back into line.
		server.Limit(fakes.RateLimits{RequestsPerMinute: 10, Window: 2 * time.Second, OmitHeaders: true})
		server.Default(fakes.Reply{Content: "done", Tokens: 100})
		cfg := MakeConfig("busy", ns).Agents(
			endpointAgent("triage", v1alpha1.KindModelEndpoint).HandsOffTo("writer"),
			endpointAgent("writer", v1alpha1.KindModelEndpoint).Terminator(),
		).Obj()
		server.ReplyTo("triage", fakes.Reply{Content: "to the writer", Tokens: 100,
			ToolCalls: []fakes.ToolCall{{Name: "transfer_to_writer", Args: `{"reason":"write it"}`}}})
		objs := []client.Object{apiKeySecret(ns), modelEndpoint(ns, server, 600), cfg}
		var runs []*v1alpha1.AgentRun
		for i := range 16 {
			run := MakeRun(fmt.Sprintf("r%d", i), ns).Config(cfg.Name).Input("ticket").Obj()
			runs = append(runs, run)
			objs = append(objs, run)
		}
		create(objs...)
		for _, run := range runs {
			run = waitForEnd(run)
			Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
			Expect(run.Status.ErrorCount).To(BeZero(), "a 429 counted as a failed step")
		}
		stats := server.Stats()
		Expect(stats.RateLimited).To(BeNumerically(">", 0), "the server's limit never bound: the test shows nothing")
		Expect(stats.OK).To(BeEquivalentTo(32))
		Expect(stats.PeakWindowRequests).To(BeNumerically("<=", 10))

		// The endpoint's status says what it saw.
		Eventually(func(g Gomega) {
			e := &v1alpha1.ModelEndpoint{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm"}, e)).To(Succeed())
			g.Expect(e.Status.RateLimited).To(BeNumerically(">", 0))
			g.Expect(meta.IsStatusConditionTrue(e.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
		}, runTimeout, poll).Should(Succeed())
	})

	It("say a paced run waits for capacity, and its steps' writes carry that without writes of their own", func() {
		// Six agents in a chain on an endpoint that allows a call every 5 s: after the first
		// burst, each step waits for its turn longer than a run waits before it says so.
		chain := []string{"a1", "a2", "a3", "a4", "a5", "a6"}
		var agents []*AgentWrapper
		for i, name := range chain {
			a := endpointAgent(name, v1alpha1.KindModelEndpoint)
			if i == len(chain)-1 {
				agents = append(agents, a.Terminator())
				server.ReplyTo(name, fakes.Reply{Content: "done", Tokens: 20})
				continue
			}
			next := chain[i+1]
			agents = append(agents, a.HandsOffTo(next))
			server.ReplyTo(name, fakes.Reply{Content: "on to " + next, Tokens: 20,
				ToolCalls: []fakes.ToolCall{{Name: "transfer_to_" + next, Args: `{"reason":"next"}`}}})
		}
		cfg := MakeConfig("paced", ns).Agents(agents...).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("ticket").Obj()
		create(apiKeySecret(ns), modelEndpoint(ns, server, 12), cfg, run)
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(get(run).Status.Conditions, v1alpha1.ConditionProgressing)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonRateLimited))
			g.Expect(c.Message).To(MatchRegexp(`^step \d of agent a\d waits for the capacity of ModelEndpoint llm \(waiting \d+s\); rate limits never fail a run$`))
		}, runTimeout, poll).Should(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.StepCount).To(BeEquivalentTo(len(chain)))
		// A step's write and its successor's wait are one write: the run writes about once a
		// step (the start goes with the first), with one more for the first wait.
		Expect(writesOf(run)).To(BeNumerically("<=", len(chain)+1), "status writes of a run of %d paced steps", len(chain))
		c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionProgressing)
		Expect(c.Reason).To(Equal(string(v1alpha1.ReasonCompleted)), "an ended run no longer says it waits")
	})

	It("wait Pending while their endpoint is missing, or is a ClusterModelEndpoint that does not select their namespace", func() {
		cfg := MakeConfig("shared", ns).Agents(endpointAgent("solo", v1alpha1.KindClusterModelEndpoint).Terminator()).Obj()
		server.Reply(fakes.Reply{Content: "done", Tokens: 10})
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		pendingFor := func(message string) {
			Eventually(func(g Gomega) {
				c := meta.FindStatusCondition(get(run).Status.Conditions, v1alpha1.ConditionConfigResolved)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Message).To(ContainSubstring(message))
			}, runTimeout, poll).Should(Succeed())
			Expect(get(run).Status.Phase).To(Equal(v1alpha1.PhasePending))
		}
		pendingFor("agent solo needs its model endpoint: ClusterModelEndpoint llm does not exist")

		name := "llm"
		shared := &v1alpha1.ClusterModelEndpoint{Spec: modelEndpoint(ns, server, 0).Spec}
		shared.Name = name
		shared.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": ns}}
		key := apiKeySecret("default")
		key.Name = "llm-" + ns
		shared.Spec.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: key.Name, Key: "apiKey"}
		create(key, shared)
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, shared))).To(Succeed()) })
		pendingFor("ClusterModelEndpoint llm does not serve namespace " + ns + ": its namespaceSelector does not select it")

		namespace := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		namespace.Labels = map[string]string{"team": ns}
		Expect(k8sClient.Update(ctx, namespace)).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(server.Requests()[0].Header.Get("Authorization")).To(Equal("Bearer "+fakeKey), "the key from the operator's namespace")
	})
})
