package integration

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// trio is three agents that may hand off to anyone, limits out of the way.
func trio(ns string, a, b, c *AgentWrapper) *ConfigWrapper {
	return MakeConfig("trio", ns).Agents(a.HandsOffTo("a", "b", "c"), b.HandsOffTo("a", "b", "c"), c.HandsOffTo("a", "b", "c")).
		MaxSteps(50).MaxHandoffs(50)
}

// turns says each output in order, handing off to the agent named before it: "b:hello".
func turns(specs ...string) []*TurnWrapper {
	var out []*TurnWrapper
	for _, s := range specs {
		to, text, _ := cutColon(s)
		out = append(out, Says(text).HandOff(to))
	}
	return out
}

func cutColon(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

var _ = Describe("Loop detection and budgets", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("end a looping run before the step that would close the loop, with the evidence",
		func(cfg func(ns string) *ConfigWrapper, detector v1alpha1.LoopDetector, pattern []string, steps []int32, message string) {
			c := cfg(ns).Obj()
			run := MakeRun("looping", ns).Config(c.Name).Input("start").Obj()
			create(c, run)
			run = waitForEnd(run)
			Expect(run.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
			Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonLoopDetected))
			Expect(run.Status.Loop).To(Equal(&v1alpha1.LoopStatus{Detector: detector, Pattern: pattern, Steps: steps}))
			Expect(run.Status.TerminationMessage).To(Equal(message))
			Eventually(func() []string { return eventsOf(run) }).Should(ContainElement("Warning LoopDetected: " + message))
		},
		Entry("Window: an agent that keeps handing off to itself", func(ns string) *ConfigWrapper {
			return trio(ns, MakeAgent("a").Script(turns("a:one", "a:two", "a:three", "a:four")...), MakeAgent("b"), MakeAgent("c"))
		}, v1alpha1.DetectorWindow, []string{"a", "a", "a"}, []int32{1, 2, 3},
			"loop detected (Window): the last 3 steps, a (1), a (2), a (next, 3), have 1 distinct agent(s), fewer than minUniqueAgents 2"),
		Entry("Cycle: orchestrator and ticketing ping-pong, saying new things each time", func(ns string) *ConfigWrapper {
			return trio(ns,
				MakeAgent("a").Script(turns("b:draft 1", "b:draft 2", "b:draft 3", "b:draft 4")...),
				MakeAgent("b").Script(turns("a:note 1", "a:note 2", "a:note 3", "a:note 4")...),
				MakeAgent("c"))
		}, v1alpha1.DetectorCycle, []string{"a", "b"}, []int32{1, 2, 3, 4, 5, 6},
			"loop detected (Cycle): a -> b -> a repeated 3 times in a row at steps 1-6 (maxCycleRepeats 3)"),
		Entry("RepeatedInput: an agent handed the same input again", func(ns string) *ConfigWrapper {
			return trio(ns,
				MakeAgent("a").Script(turns("b:check the cache", "c:go on", "b:check the cache")...),
				MakeAgent("b").Script(turns("a:nothing cached")...),
				MakeAgent("c").Script(turns("a:done?")...))
		}, v1alpha1.DetectorRepeatedInput, []string{"b"}, []int32{2, 6},
			fmt.Sprintf("loop detected (RepeatedInput): b would be given the same input (digest %s) for the 2nd time, at steps 2, 6 (maxRepeatedInputs 2)", digestOf("check the cache"))),
		Entry("RepeatedOutput: an agent that says the same thing whatever it is given", func(ns string) *ConfigWrapper {
			return trio(ns,
				MakeAgent("a").Script(turns("b:I am stuck")...),
				MakeAgent("b").Script(turns("c:try 1", "c:try 2", "c:try 3")...),
				MakeAgent("c").Script(turns("a:idea 1", "a:idea 2", "a:idea 3")...),
			).LoopDetection(nil, nil, nil, ptr.To[int32](10), nil)
		}, v1alpha1.DetectorRepeatedOutput, []string{"a"}, []int32{1, 4, 7},
			fmt.Sprintf("loop detected (RepeatedOutput): a returned the same output (digest %s) 3 times, at steps 1, 4, 7 (maxRepeatedOutputs 3)", digestOf("I am stuck"))),
	)

	It("lets a coder and a reviewer go round until the review converges", func() {
		var coder, reviewer []*TurnWrapper
		for round := 1; round <= 6; round++ {
			coder = append(coder, Says(fmt.Sprintf("patch v%d", round)).HandOff("reviewer"))
			if round < 6 {
				reviewer = append(reviewer, Says(fmt.Sprintf("round %d: handle case %d", round, round)).HandOff("coder"))
			}
		}
		reviewer = append(reviewer, Says("LGTM, merged"))
		cfg := MakeConfig("review", ns).Agents(
			MakeAgent("coder").HandsOffTo("reviewer").Script(coder...),
			MakeAgent("reviewer").HandsOffTo("coder").Terminator().Script(reviewer...),
		).Allow(10, "coder", "reviewer").Obj()
		run := MakeRun("pr-42", ns).Config(cfg.Name).Input("add retries to the client").Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.Output).To(Equal("LGTM, merged"))
		Expect(run.Status.StepCount).To(BeEquivalentTo(12))
		Expect(run.Status.Loop).To(BeNil())
	})

	It("asks again after a truncated answer and does not count the retry as a repeat", func() {
		cfg := MakeConfig("report", ns).Agents(
			MakeAgent("writer").HandsOffTo("editor").Script(
				Says("The quarterly report: revenue grew 12% and").Truncated().Tokens(1024),
				Says(" churn fell to 2%.").HandOff("editor").Tokens(900)),
			MakeAgent("editor").Terminator().Script(Says("Published.")),
		).LoopDetection(ptr.To[int32](2), nil, ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2)).Obj()
		run := MakeRun("q3", ns).Config(cfg.Name).Input("write the Q3 report").Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(run.Status.ErrorCount).To(BeZero())
		Expect(run.Status.HandoffSequence[0].Outcome).To(Equal(v1alpha1.OutcomeTruncated))
		Expect(run.Status.HandoffSequence[0].To).To(Equal("writer"))
		Expect(sequence(run)).To(Equal([]string{"writer->writer", "writer->editor", "editor->"}))
		var second struct{ Output string }
		Expect(json.Unmarshal(transcriptOf(run)[1].Body, &second)).To(Succeed())
		Expect(second.Output).To(Equal("The quarterly report: revenue grew 12% and churn fell to 2%."), "the pieces are joined")
	})

	It("warns once at the token warning threshold, then ends the run at the budget", func() {
		cfg := MakeConfig("spender", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(turns("b:think 1", "b:think 2", "b:think 3", "b:think 4")...),
			MakeAgent("b").HandsOffTo("a").Script(turns("a:more 1", "a:more 2", "a:more 3", "a:more 4")...),
		).MaxTokens(1000).Allow(10, "a", "b").Obj()
		for i := range cfg.Spec.Agents {
			for j := range cfg.Spec.Agents[i].Script {
				cfg.Spec.Agents[i].Script[j].Tokens = 230
			}
		}
		run := MakeRun("burn", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonTokenBudgetExceeded))
		Expect(run.Status.TerminationMessage).To(Equal("token budget: tokens 1150 of 1000 used; b was not started"))
		warning := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionTokenBudgetWarning)
		Expect(warning).NotTo(BeNil())
		Expect(warning.Message).To(Equal("token budget: tokens 920 of 1000 used (92%), past the warning at 90%"))
		Eventually(func() []string { return eventsOf(run) }).Should(SatisfyAll(
			ContainElement("Warning TokenBudgetWarning: token budget: tokens 920 of 1000 used (92%), past the warning at 90%"),
			ContainElement("Warning TokenBudgetExceeded: token budget: tokens 1150 of 1000 used; b was not started")))
		Expect(eventsOf(run)).To(HaveLen(2), "one warning, the end")
	})
})

var _ = Describe("StateMachine mode", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("runs the state-machine helpdesk from the seed design through its states to Terminated", func() {
		cfg, runs := loadSample("helpdesk-statemachine.yaml", ns)
		create(cfg, runs[0])
		run := waitForEnd(runs[0])
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonTerminated))
		Expect(run.Status.TerminationMessage).To(Equal("terminator ticketing emitted TERMINATE_WORKFLOW at step 6"))
		var reasons []string
		for _, r := range run.Status.HandoffSequence {
			reasons = append(reasons, r.Reason)
		}
		Expect(reasons).To(Equal([]string{
			"NO_MEMORY_FOUND: MEMORY_CHECK_PENDING -> TICKET_ANALYSIS_PENDING",
			"TICKET_ANALYZED: TICKET_ANALYSIS_PENDING -> WORKER_PROCESSING",
			"RESOLUTION_OBTAINED: WORKER_PROCESSING -> MEMORY_STORAGE_PENDING",
			"MEMORY_STORED: MEMORY_STORAGE_PENDING -> SUMMARY_PENDING",
			"WORKFLOW_COMPLETE: SUMMARY_PENDING -> FINAL_UPDATE_PENDING",
			"TERMINATE_WORKFLOW",
		}))
		// TERMINATE_WORKFLOW both ends the run (a terminator's Terminate) and leads to TERMINATED.
		Expect(run.Status.State).To(Equal("TERMINATED"))
	})

	It("runs the ECS router from the seed design: a failed operation goes back for context, then completes", func() {
		cfg, runs := loadSample("ecs-router.yaml", ns)
		create(cfg, runs[0])
		run := waitForEnd(runs[0])
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(run.Status.TerminationMessage).To(Equal("reached final state DONE on OPERATION_COMPLETED from OPERATIONS at step 4"))
		Expect(sequence(run)).To(Equal([]string{"contextualizer->operations", "operations->contextualizer",
			"contextualizer->operations", "operations->"}))
	})

	It("pauses the ECS router for the user's reply when the message says too little, as seed 001 does", func() {
		cfg, runs := loadSample("ecs-router.yaml", ns)
		Expect(runs).To(HaveLen(2))
		create(cfg, runs[1])
		run := waitForPhase(runs[1], v1alpha1.PhaseAwaitingInput)
		Expect(run.Status.PendingInput.Question).To(HavePrefix("Which service is affected"))
		Expect(annotate(alice, run, v1alpha1.AnnotationReply, "checkout-api, task arn:aws:ecs:us-east-1:123:task/prod-east/abc")).To(Succeed())
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), run.Status.TerminationMessage)
		Expect(sequence(run)).To(Equal([]string{"contextualizer->", "contextualizer->operations", "operations->contextualizer",
			"contextualizer->operations", "operations->"}))
		Expect(records(run)).To(Equal([]string{"Replied by alice"}))
	})

	It("counts a step with no transition as a failed step and follows onError", func() {
		cfg := MakeConfig("strict", ns).Mode(v1alpha1.ModeStateMachine).Agents(
			MakeAgent("checker").Script(Says("I am not sure what this is.")),
			MakeAgent("human").Script(Says("Handled by hand.\nRESOLVED")),
		).Signal("KNOWN", v1alpha1.ActionNone).Signal("RESOLVED", v1alpha1.ActionNone).
			State("CHECK", "checker", map[string]string{"KNOWN": "DONE"}).
			State("ESCALATED", "human", map[string]string{"RESOLVED": "DONE"}).
			State("DONE", "", nil).Obj()
		cfg.Spec.States[0].OnError = "ESCALATED"
		run := MakeRun("r", ns).Config(cfg.Name).Obj()
		create(cfg, run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Expect(run.Status.ErrorCount).To(BeEquivalentTo(1))
		Expect(run.Status.HandoffSequence[0].Reason).To(Equal("state CHECK: checker emitted no signal; expected one of KNOWN"))
		Expect(eventsOf(run)).To(ContainElement(
			"Warning StepFailed: step 1 of agent checker failed: state CHECK: checker emitted no signal; expected one of KNOWN; human takes over"))
	})
})
