package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// helpdeskSequence is the handoff sequence of the helpdesk sample's happy path.
var helpdeskSequence = []string{
	"orchestrator->memory", "memory->orchestrator", "orchestrator->ticketing", "ticketing->orchestrator",
	"orchestrator->network", "network->orchestrator", "orchestrator->memory", "memory->orchestrator",
	"orchestrator->summarization", "summarization->orchestrator", "orchestrator->ticketing", "ticketing->",
}

// pingPong is a Swarm of two agents that hand off to each other forever, with the loop
// detectors relaxed so that the limits are what ends it.
func pingPong(ns string) *ConfigWrapper {
	return tolerant(MakeConfig("ping-pong", ns).Agents(
		MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b").Tokens(100)),
		MakeAgent("b").HandsOffTo("a").Script(Says("to a").HandOff("a").Tokens(100)),
	).MaxHandoffs(100).MaxSteps(100))
}

// tolerant relaxes the loop detectors for a config whose agents a and b say the same things
// over and over, so that a limit test sees its limit.
func tolerant(c *ConfigWrapper) *ConfigWrapper {
	return c.LoopDetection(nil, nil, nil, ptr.To[int32](50), ptr.To[int32](50)).Allow(24, "a", "b")
}

var _ = Describe("An AgentRun", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("runs the helpdesk sample to Succeeded with the expected handoff sequence", func() {
		cfg, runs := loadSample("helpdesk.yaml", ns)
		create(cfg, runs[0])
		run := waitForEnd(runs[0])

		Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonTerminated))
		Expect(run.Status.TerminationMessage).To(Equal("terminator ticketing emitted TERMINATE_WORKFLOW at step 12"))
		Expect(sequence(run)).To(Equal(helpdeskSequence[2:]), "status keeps the latest 10 of 12")
		Expect(run.Status.StepCount).To(BeEquivalentTo(12))
		Expect(run.Status.HandoffCount).To(BeEquivalentTo(11))
		Expect(run.Status.TokensUsed).To(BeEquivalentTo(1340))
		Expect(run.Status.ErrorCount).To(BeZero())
		Expect(run.Status.Output).To(ContainSubstring("Ticket marked RESOLVED"))
		Expect(run.Status.StartTime).NotTo(BeNil())
		Expect(run.Status.CompletionTime).NotTo(BeNil())
		Expect(run.Status.ObservedGeneration).To(Equal(run.Generation))
		Expect(run.Status.ConfigRevision).To(HavePrefix("helpdesk-"))
		Expect(meta.IsStatusConditionTrue(run.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
		Expect(meta.IsStatusConditionFalse(run.Status.Conditions, v1alpha1.ConditionProgressing)).To(BeTrue())
		// A run that goes well makes no Event: each one is an API write, and status says it all.
		Consistently(func() []string { return eventsOf(run) }, 2*time.Second).Should(BeEmpty())
	})

	DescribeTable("ends with the limit's reason and a message that names the evidence",
		func(cfg func(ns string) *ConfigWrapper, reason v1alpha1.TerminationReason, message string) {
			c := cfg(ns).Obj()
			run := MakeRun("limited", ns).Config(c.Name).Input("go").Obj()
			create(c, run)
			run = waitForEnd(run)
			Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
			Expect(run.Status.TerminationReason).To(Equal(reason))
			Expect(run.Status.TerminationMessage).To(MatchRegexp(message))
			Eventually(func() []string { return eventsOf(run) }).Should(ContainElement(
				fmt.Sprintf("Warning %s: %s", reason, run.Status.TerminationMessage)))
		},
		Entry("maxHandoffs", func(ns string) *ConfigWrapper { return pingPong(ns).MaxHandoffs(4) },
			v1alpha1.ReasonMaxHandoffsExceeded, `^handoff limit: handoff 4 of 4 reached; a was not started; last handoffs: a -> b -> a -> b -> a$`),
		Entry("maxSteps", func(ns string) *ConfigWrapper { return pingPong(ns).MaxSteps(3) },
			v1alpha1.ReasonMaxStepsExceeded, `^step limit: 3 of 3 steps taken; b was not started$`),
		Entry("maxTokens", func(ns string) *ConfigWrapper { return pingPong(ns).MaxTokens(250) },
			v1alpha1.ReasonTokenBudgetExceeded, `^token budget: tokens 300 of 250 used; b was not started$`),
		Entry("timeout, enforced at the deadline while a step is still running", func(ns string) *ConfigWrapper {
			return MakeConfig("slow", ns).Agents(
				MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b").Delay(time.Second)),
				MakeAgent("b").HandsOffTo("a").Script(Says("to a").HandOff("a").Delay(time.Hour)),
			).Timeout(2 * time.Second).AgentTimeout(2 * time.Hour)
		}, v1alpha1.ReasonTimeout, `^run timeout: [23]s elapsed of 2s; b had control after step 1$`),
		Entry("agentTimeout, when the entrypoint runs past it", func(ns string) *ConfigWrapper {
			return MakeConfig("stuck", ns).Agents(
				MakeAgent("a").Script(Says("never").Delay(time.Hour)),
			).AgentTimeout(500 * time.Millisecond)
		}, v1alpha1.ReasonAgentTimeout, `^a failed with no agent to recover \(timed out after 500ms\) at step 1$`),
		Entry("an agent's own timeout: its steps fail until maxErrors", func(ns string) *ConfigWrapper {
			return tolerant(MakeConfig("flaky", ns).Agents(
				MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
				MakeAgent("b").HandsOffTo("a").Timeout(300*time.Millisecond).Script(Says("late").Delay(time.Hour)),
			).MaxErrors(2))
		}, v1alpha1.ReasonTooManyErrors, `^error limit: 2 of 2 steps failed; last failure at step 4, agent b: timed out after 300ms$`),
		Entry("maxErrors", func(ns string) *ConfigWrapper {
			return tolerant(MakeConfig("broken", ns).Agents(
				MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
				MakeAgent("b").HandsOffTo("a").Script(Says("").Fails("database unavailable")),
			).MaxErrors(3))
		}, v1alpha1.ReasonTooManyErrors, `^error limit: 3 of 3 steps failed; last failure at step 6, agent b: database unavailable$`),
		Entry("an agent's maxSteps", func(ns string) *ConfigWrapper {
			return tolerant(MakeConfig("capped", ns).Agents(
				MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
				MakeAgent("b").HandsOffTo("a").MaxSteps(2).Script(Says("to a").HandOff("a")),
			))
		}, v1alpha1.ReasonAgentStepLimitExceeded, `^agent step limit: b took 2 of its 2 steps and was not started again$`),
	)

	It("refuses a handoff outside the agent's handoffs, with an Event, and the entrypoint recovers", func() {
		cfg := MakeConfig("refusal", ns).Agents(
			MakeAgent("lead").HandsOffTo("worker", "closer").Script(
				Says("work please").HandOff("worker").When("task"),
				Says("close please").HandOff("closer").When("refused")),
			MakeAgent("worker").HandsOffTo("lead").Script(Says("jumping the queue").HandOff("closer")),
			MakeAgent("closer").Terminator().Script(Says("closed")),
		).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("task").Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(sequence(run)).To(Equal([]string{"lead->worker", "worker->lead", "lead->closer", "closer->"}))
		Expect(run.Status.HandoffSequence[1].Outcome).To(Equal(v1alpha1.OutcomeFailed))
		Expect(run.Status.HandoffSequence[1].Reason).To(Equal("handoff to closer refused: not in the handoffs of worker"))
		Expect(run.Status.ErrorCount).To(BeEquivalentTo(1))
		Expect(eventsOf(run)).To(ContainElement("Warning HandoffRefused: handoff to closer refused: not in the handoffs of worker"))
	})

	It("ignores Terminate from an agent that is not a terminator", func() {
		cfg := MakeConfig("authority", ns).Agents(
			MakeAgent("lead").HandsOffTo("worker", "closer").Script(
				Says("work please").HandOff("worker").When("task"),
				Says("close please").HandOff("closer").When("done")),
			MakeAgent("worker").HandsOffTo("lead").Script(Says("done, TERMINATE_WORKFLOW").Emits("TERMINATE_WORKFLOW").HandOff("lead")),
			MakeAgent("closer").Terminator().Script(Says("closed. TERMINATE_WORKFLOW").Emits("TERMINATE_WORKFLOW")),
		).Signal("TERMINATE_WORKFLOW", v1alpha1.ActionTerminate).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Input("task").Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonTerminated))
		Expect(run.Status.TerminationMessage).To(Equal("terminator closer emitted TERMINATE_WORKFLOW at step 4"))
		Expect(sequence(run)).To(Equal([]string{"lead->worker", "worker->lead", "lead->closer", "closer->"}))
		Expect(eventsOf(run)).To(ContainElement(
			"Warning TerminateIgnored: agent worker emitted TERMINATE_WORKFLOW (Terminate) but is not a terminator; the signal was ignored"))
	})

	It("is cancelled by the cancel annotation, even in the middle of a step", func() {
		cfg := MakeConfig("slow", ns).Agents(MakeAgent("a").Script(Says("eventually").Delay(time.Hour))).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		Eventually(func() v1alpha1.RunPhase { return get(run).Status.Phase }, runTimeout, poll).Should(Equal(v1alpha1.PhaseRunning))

		Expect(annotate(k8sClient, run, v1alpha1.AnnotationCancel, "wrong ticket")).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseCancelled))
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCancelled))
		Expect(run.Status.TerminationMessage).To(Equal("cancelled by annotation agents.baton.dev/cancel: wrong ticket"))
		Expect(run.Status.StepCount).To(BeZero())
	})

	It("never changes once terminal, whatever is annotated or edited", func() {
		cfg, runs := loadSample("helpdesk.yaml", ns)
		create(cfg, runs[0])
		done := waitForEnd(runs[0])

		Expect(annotate(k8sClient, done, v1alpha1.AnnotationCancel, "too late")).To(Succeed())

		edited := get(done)
		edited.Spec.Input = "a different ticket"
		err := k8sClient.Update(ctx, edited)
		Expect(err).To(MatchError(ContainSubstring("spec is immutable: to change a run, create another")))

		Consistently(func() v1alpha1.AgentRunStatus { return get(done).Status }, 2*time.Second, 200*time.Millisecond).
			Should(Equal(done.Status))
	})

	It("waits Pending with a condition while its config is missing, and starts when it appears", func() {
		run := MakeRun("early", ns).Config("helpdesk").Input("Ticket 7: printer on fire").Obj()
		create(run)
		Eventually(func(g Gomega) {
			r := get(run)
			g.Expect(r.Status.Phase).To(Equal(v1alpha1.PhasePending))
			c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionConfigResolved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonConfigNotFound))
			g.Expect(c.Message).To(ContainSubstring("AgentConfig helpdesk does not exist"))
		}, runTimeout, poll).Should(Succeed())

		cfg, _ := loadSample("helpdesk.yaml", ns)
		create(cfg)
		run = waitForEnd(run)
		Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		Expect(meta.IsStatusConditionTrue(run.Status.Conditions, v1alpha1.ConditionConfigResolved)).To(BeTrue())
	})

	It("ends ConfigInvalid when its config cannot run", func() {
		// The API server takes any object as a schema; the operator compiles it.
		cfg := MakeConfig("typed", ns).Agents(MakeAgent("a").Script(Says("{}"))).Obj()
		cfg.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type": 12}`)}
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(run.Status.TerminationMessage).To(ContainSubstring("spec.agents[0].outputSchema"))
		Expect(run.Status.TerminationMessage).To(ContainSubstring("not a valid JSON Schema"))
		Expect(meta.IsStatusConditionFalse(run.Status.Conditions, v1alpha1.ConditionConfigResolved)).To(BeTrue())
	})

	It("uses the config as it was when the run started", func() {
		cfg := MakeConfig("pinned", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("version one").HandOff("b")),
			MakeAgent("b").Script(Says("answer from version one").Delay(2*time.Second)),
		).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		Eventually(func() string { return get(run).Status.CurrentAgent }, runTimeout, poll).Should(Equal("b"))

		latest := &v1alpha1.AgentConfig{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), latest)).To(Succeed())
		latest.Spec.Agents[1].Script[0].Output = "answer from version two"
		Expect(k8sClient.Update(ctx, latest)).To(Succeed())

		run = waitForEnd(run)
		Expect(run.Status.Output).To(Equal("answer from version one"))
		second := MakeRun("r2", ns).Config(cfg.Name).Obj()
		create(second)
		Expect(waitForEnd(second).Status.Output).To(Equal("answer from version two"))
	})

	It("runs twenty runs at once, each independent and correct", func() {
		helpdesk, _ := loadSample("helpdesk.yaml", ns)
		create(helpdesk, pingPong(ns).MaxHandoffs(6).Obj())
		var runs []*v1alpha1.AgentRun
		for i := range 20 {
			r := MakeRun(fmt.Sprintf("run-%02d", i), ns).Input(fmt.Sprintf("Ticket %d: VPN drops", i))
			if i%2 == 0 {
				r.Config("helpdesk")
			} else {
				r.Config("ping-pong")
			}
			runs = append(runs, r.Obj())
		}
		create(func() []client.Object {
			out := make([]client.Object, len(runs))
			for i, r := range runs {
				out[i] = r
			}
			return out
		}()...)
		for i, r := range runs {
			r = waitForEnd(r)
			if i%2 == 0 {
				Expect(r.Status.TerminationReason).To(Equal(v1alpha1.ReasonTerminated), r.Name)
				Expect(sequence(r)).To(Equal(helpdeskSequence[2:]), r.Name)
			} else {
				Expect(r.Status.TerminationReason).To(Equal(v1alpha1.ReasonMaxHandoffsExceeded), r.Name)
				Expect(r.Status.StepCount).To(BeEquivalentTo(6), r.Name)
				Expect(r.Status.TokensUsed).To(BeEquivalentTo(600), r.Name)
			}
		}
	})

	It("continues where it stopped when the operator restarts", func() {
		cfg := tolerant(MakeConfig("relay", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b").Delay(300*time.Millisecond)),
			MakeAgent("b").HandsOffTo("a").Script(Says("to a").HandOff("a").Delay(300*time.Millisecond)),
		).MaxHandoffs(8)).Obj()
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		Eventually(func() int32 { return get(run).Status.StepCount }, runTimeout, poll).Should(BeNumerically(">=", 2))

		stopManager()
		stopped := get(run)
		Expect(stopped.Status.Phase).To(Equal(v1alpha1.PhaseRunning))
		Consistently(func() int32 { return get(run).Status.StepCount }, time.Second, 100*time.Millisecond).
			Should(Equal(stopped.Status.StepCount))
		stopManager = startManager(controllerOptions)

		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonMaxHandoffsExceeded))
		Expect(run.Status.StepCount).To(BeEquivalentTo(8))
		steps := make([]int32, 0, len(run.Status.HandoffSequence))
		for _, r := range run.Status.HandoffSequence {
			steps = append(steps, r.Step)
		}
		Expect(steps).To(Equal([]int32{1, 2, 3, 4, 5, 6, 7, 8}))
	})
})

var _ = Describe("A slow agent step", func() {
	It("does not hold up other runs", func() {
		ns := newNamespace()
		slow := MakeConfig("slow", ns).Agents(MakeAgent("a").Script(Says("eventually").Delay(time.Hour))).Obj()
		helpdesk, _ := loadSample("helpdesk.yaml", ns)
		create(slow, helpdesk)
		// More slow runs than the manager has reconcile workers (4), started first.
		var slowRuns []*v1alpha1.AgentRun
		for i := range 8 {
			r := MakeRun(fmt.Sprintf("slow-%d", i), ns).Config("slow").Obj()
			slowRuns = append(slowRuns, r)
			create(r)
		}
		for _, r := range slowRuns {
			Eventually(func() v1alpha1.RunPhase { return get(r).Status.Phase }, runTimeout, poll).Should(Equal(v1alpha1.PhaseRunning))
		}
		fast := MakeRun("fast", ns).Config("helpdesk").Input("Ticket 9: VPN drops").Obj()
		create(fast)
		Expect(waitForEnd(fast).Status.TerminationReason).To(Equal(v1alpha1.ReasonTerminated))
		for _, r := range slowRuns {
			Expect(get(r).Status.Phase).To(Equal(v1alpha1.PhaseRunning), "%s is still in its first step", r.Name)
		}
	})
})
