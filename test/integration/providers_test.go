package integration

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents/httpagent"
	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

const fakeKey = "sk-fake-7f3a9c2e1b"

// modelAgent is an agent on the fake OpenAI-compatible server, with its key in Secret llm.
func modelAgent(name string, server *fakes.OpenAI) *AgentWrapper {
	a := MakeAgent(name).Provider(v1alpha1.ProviderOpenAI)
	a.Model.Name, a.Model.Endpoint = "gpt-4o-mini", server.BaseURL()
	a.Model.APIKeySecretRef = &v1alpha1.SecretKeyRef{Name: "llm", Key: "apiKey"}
	a.Model.MaxOutputTokens = ptr.To[int32](200)
	a.Description = name + " work"
	return a
}

func apiKeySecret(ns string) *corev1.Secret {
	s := &corev1.Secret{StringData: map[string]string{"apiKey": fakeKey}}
	s.Name, s.Namespace = "llm", ns
	s.Labels = map[string]string{v1alpha1.LabelAPIKey: "true"}
	return s
}

var _ = Describe("Agents on a model server", func() {
	var ns string
	var server *fakes.OpenAI
	BeforeEach(func() {
		ns = newNamespace()
		server = fakes.NewOpenAI()
		DeferCleanup(server.Close)
	})

	It("hand off with tool calls, count the usage, and see the earlier steps", func() {
		cfg := MakeConfig("support", ns).Agents(
			modelAgent("triage", server).HandsOffTo("network"),
			modelAgent("network", server).Terminator(),
		).Obj()
		server.ReplyTo("triage", fakes.Reply{Content: "A VPN problem.", Tokens: 300, ToolCalls: []fakes.ToolCall{
			{Name: "transfer_to_network", Args: `{"reason":"VPN drops"}`}, {Name: "transfer_to_triage", Args: `{}`}}})
		server.ReplyTo("network", fakes.Reply{Content: "Enable keepalive every 60s.", Tokens: 250})
		run := MakeRun("t1", ns).Config(cfg.Name).Input("Ticket 1: VPN drops every 10 minutes").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("Enable keepalive every 60s."))
		Expect(run.Status.TokensUsed).To(BeEquivalentTo(550))
		Expect(sequence(run)).To(Equal([]string{"triage->network", "network->"}))
		Expect(run.Status.HandoffSequence[0].Reason).To(Equal("VPN drops"))
		Eventually(func() []string { return eventsOf(run) }).Should(ContainElement(
			"Normal ToolCallsIgnored: step 1 of agent triage called several tools; the first was used, these were ignored: transfer_to_triage"))

		sent := server.Requests()
		Expect(sent).To(HaveLen(2))
		Expect(sent[0].Header.Get("Authorization")).To(Equal("Bearer " + fakeKey))
		Expect(sent[1].Agent()).To(Equal("network"))
		network := sent[1].Messages
		Expect(network[1].Content).To(Equal("Task:\nTicket 1: VPN drops every 10 minutes"))
		Expect(network[2].Content).To(ContainSubstring("[step 1] triage: A VPN problem."))
		Expect(network[3].Content).To(Equal("You have control (VPN drops). Your input:\nA VPN problem."))
	})

	It("wait Pending while the API key's Secret is missing, and start once it exists", func() {
		cfg := MakeConfig("keyless", ns).Agents(modelAgent("solo", server)).Obj()
		server.Reply(fakes.Reply{Content: "done"})
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(get(run).Status.Conditions, v1alpha1.ConditionConfigResolved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonSecretNotFound))
			g.Expect(c.Message).To(Equal("agent solo needs its API key: the Secret llm in namespace " + ns +
				" does not exist or is not labelled agents.baton.dev/api-key=true; Baton only reads Secrets marked for it" +
				"; the run starts when it can be read"))
		}, runTimeout, poll).Should(Succeed())
		Expect(get(run).Status.Phase).To(Equal(v1alpha1.PhasePending))

		// A Secret that is not marked for Baton is not read.
		secret := apiKeySecret(ns)
		secret.Labels = nil
		create(secret)
		Consistently(func() v1alpha1.RunPhase { return get(run).Status.Phase }, 6*time.Second, 200*time.Millisecond).
			Should(Equal(v1alpha1.PhasePending), "the run started with a Secret not marked for Baton")

		secret.Labels = map[string]string{v1alpha1.LabelAPIKey: "true"}
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Expect(waitForEnd(run).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})

	DescribeTable("fail a step with what the server answered, never the key",
		func(reply fakes.Reply, timeout time.Duration, reason v1alpha1.TerminationReason, message string) {
			a := modelAgent("solo", server)
			if timeout > 0 {
				a = a.Timeout(timeout)
			}
			cfg := MakeConfig("failing", ns).Agents(a).Obj()
			server.Reply(reply)
			run := MakeRun("r", ns).Config(cfg.Name).Obj()
			create(apiKeySecret(ns), cfg, run)
			run = waitForEnd(run)
			Expect(run.Status.TerminationReason).To(Equal(reason))
			Expect(run.Status.TerminationMessage).To(Equal(message))
			for _, e := range eventsOf(run) {
				Expect(e).NotTo(ContainSubstring(fakeKey))
			}
		},
		Entry("401", fakes.Reply{Status: http.StatusUnauthorized, ErrorMessage: "Incorrect API key provided: " + fakeKey}, time.Duration(0),
			v1alpha1.ReasonTooManyErrors, "solo failed with no agent to recover (the model server answered 401 Unauthorized: Incorrect API key provided: [redacted]) at step 1"),
		Entry("a server that hangs past the step's timeout", fakes.Reply{Hang: true}, 700*time.Millisecond,
			v1alpha1.ReasonAgentTimeout, "solo failed with no agent to recover (timed out after 700ms) at step 1"),
	)

	It("continue a truncated answer with a larger token limit", func() {
		cfg := MakeConfig("report", ns).Agents(modelAgent("writer", server).Terminator()).Obj()
		server.Reply(fakes.Reply{Content: "Q3: revenue grew 12% and", FinishReason: "length", Tokens: 200},
			fakes.Reply{Content: " churn fell to 2%.", Tokens: 120})
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("Q3: revenue grew 12% and churn fell to 2%."))
		Expect(run.Status.HandoffSequence[0].Outcome).To(Equal(v1alpha1.OutcomeTruncated))
		Expect(server.Requests()[1].MaxCompletionTokens).To(BeEquivalentTo(400))
	})

	DescribeTable("repair an answer that does not match its schema, at most twice",
		func(replies []fakes.Reply, reason v1alpha1.TerminationReason, check func(run *v1alpha1.AgentRun)) {
			a := modelAgent("triager", server).Terminator()
			a.OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":["answer","confidence"],"properties":{"answer":{"type":"string"},"confidence":{"type":"number","maximum":1}}}`)}
			cfg := MakeConfig("typed", ns).Agents(a).Obj()
			server.Reply(replies...)
			run := MakeRun("r", ns).Config(cfg.Name).Obj()
			create(apiKeySecret(ns), cfg, run)
			run = waitForEnd(run)
			Expect(run.Status.TerminationReason).To(Equal(reason), run.Status.TerminationMessage)
			check(run)
		},
		Entry("a repair that succeeds", []fakes.Reply{{Content: `{"answer": "pay", "confidence": 3}`}, {Content: `{"answer": "pay", "confidence": 0.8}`}},
			v1alpha1.ReasonCompleted, func(run *v1alpha1.AgentRun) {
				Expect(run.Status.Output).To(Equal(`{"answer":"pay","confidence":0.8}`))
				Expect(run.Status.StepCount).To(BeEquivalentTo(2))
				Expect(server.Requests()[1].Messages[len(server.Requests()[1].Messages)-1].Content).To(ContainSubstring("/confidence"))
			}),
		Entry("a repair that fails", []fakes.Reply{{Content: "pay it"}},
			v1alpha1.ReasonInvalidOutput, func(run *v1alpha1.AgentRun) {
				Expect(run.Status.StepCount).To(BeEquivalentTo(3))
				Expect(run.Status.TerminationMessage).To(HavePrefix("triager's output still does not match its outputSchema after 2 repairs: the answer is not a JSON value"))
			}),
	)
})

var _ = Describe("A supervisor", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("runs the invoice-triage sample (Scripted twin) with a fallback below minConfidence", func() {
		cfg, runs := loadSample("invoice-triage.yaml", ns)
		create(cfg, runs[0])
		run := waitForEnd(runs[0])
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(sequence(run)).To(Equal([]string{"supervisor->erp-lookup", "erp-lookup->supervisor", "supervisor->policy", "policy->supervisor", "supervisor->"}))
		Expect(run.Status.HandoffSequence[2].Reason).To(Equal("fallback policy: confidence 0.55 for verifier is below minConfidence 0.70"))
		Expect(*run.Status.HandoffSequence[2].Confidence).To(Equal(0.55))
		Expect(run.Status.Output).To(HavePrefix(`{"action_required":true,"answer":"INV-1042`))
	})

	It("routes through a model's route tool, and ends RoutingExhausted when the children keep failing", func() {
		server := fakes.NewOpenAI()
		DeferCleanup(server.Close)
		boss := modelAgent("supervisor", server)
		cfg := MakeConfig("triage", ns).Mode(v1alpha1.ModeSupervisor).Agents(boss, modelAgent("billing", server), modelAgent("disputes", server)).Obj()
		cfg.Spec.Routing = &v1alpha1.Routing{Supervisor: "supervisor", MaxReroutes: ptr.To[int32](1)}
		server.ReplyTo("supervisor",
			fakes.Reply{Content: "look at billing", ToolCalls: []fakes.ToolCall{{Name: "route", Args: `{"target":"billing","confidence":0.9,"reason":"an invoice"}`}}},
			fakes.Reply{Content: "try disputes", ToolCalls: []fakes.ToolCall{{Name: "route", Args: `{"target":"disputes","confidence":0.8,"reason":"maybe a dispute"}`}}})
		server.ReplyTo("billing", fakes.Reply{Status: http.StatusBadRequest, ErrorMessage: "context too long"})
		server.ReplyTo("disputes", fakes.Reply{Status: http.StatusBadRequest, ErrorMessage: "context too long"})
		run := MakeRun("r", ns).Config(cfg.Name).Input("Is INV-7 disputed?").Obj()
		create(apiKeySecret(ns), cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonRoutingExhausted))
		Expect(run.Status.TerminationMessage).To(Equal("routing exhausted: 2 child steps failed in a row, more than maxReroutes 1; last: disputes at step 4"))
		Expect(sequence(run)).To(Equal([]string{"supervisor->billing", "billing->supervisor", "supervisor->disputes", "disputes->"}))
		routeTool := server.Requests()[0].ToolNames()
		Expect(routeTool).To(Equal([]string{"route"}))
	})
})

var _ = Describe("An agent behind HTTP", func() {
	It("gets the same idempotency key for the retries of a step and a new one for the next", func() {
		ns := newNamespace()
		agent := fakes.NewHTTPAgent(
			fakes.HTTPAnswer{Status: http.StatusBadGateway, Body: map[string]any{"error": "warming up"}},
			fakes.HTTPAnswer{Body: map[string]any{"output": "found 3 papers", "handoff": "writer", "tokens": 90}},
		)
		DeferCleanup(agent.Close)
		researcher := MakeAgent("researcher").Provider(v1alpha1.ProviderHTTP).HandsOffTo("writer")
		researcher.Model.Endpoint = agent.URL + "/step"
		cfg := MakeConfig("research", ns).Agents(researcher,
			MakeAgent("writer").Terminator().Script(Says("a survey of 3 papers"))).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("survey loop detection").Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		calls := agent.Calls()
		Expect(calls).To(HaveLen(2))
		Expect(calls[0].IdempotencyKey).To(Equal(calls[1].IdempotencyKey))
		Expect(calls[0].IdempotencyKey).To(Equal(httpagent.IdempotencyKey(string(run.UID), 1)))
		Expect(httpagent.IdempotencyKey(string(run.UID), 2)).NotTo(Equal(calls[0].IdempotencyKey))
		Expect(calls[1].Body["task"]).To(Equal("survey loop detection"))
		Expect(strings.ToLower(calls[1].Body["agent"].(map[string]any)["name"].(string))).To(Equal("researcher"))
	})
})
