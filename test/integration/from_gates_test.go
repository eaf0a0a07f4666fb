package integration

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	. "github.com/baton-dev/baton/test/builders"
)

// editConfig changes a config as its author would, on its latest version.
func editConfig(cfg *v1alpha1.AgentConfig, edit func(*v1alpha1.AgentConfig)) {
	EventuallyWithOffset(1, func() error {
		latest := &v1alpha1.AgentConfig{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cfg), latest); err != nil {
			return err
		}
		edit(latest)
		return k8sClient.Update(ctx, latest)
	}).Should(Succeed())
}

// A run started from an earlier one passes no gate nobody approved: the gate after its last
// replayed step opens again for its own approvers, and a gate before that passes only where the
// transcript records approvals that count for the new run.
var _ = Describe("A run from an earlier one at a human gate", func() {
	var ns string
	var cfg *v1alpha1.AgentConfig
	from := func(name, earlier string, step int32) *v1alpha1.AgentRun {
		run := MakeRun(name, ns).Config(cfg.Name).Obj()
		run.Spec.From = &v1alpha1.RunFrom{Run: earlier, Step: step}
		return run
	}
	BeforeEach(func() {
		ns = newNamespace()
		mayCreateRuns(ns, "alice", "bob")
		cfg = MakeConfig("payment", ns).Agents(
			MakeAgent("planner").HandsOffTo("payer").Script(Says("Plan: pay Acme's 3 invoices").HandOff("payer")),
			MakeAgent("payer").HandsOffTo("reporter").Script(Says("Paid 3 invoices").HandOff("reporter")),
			MakeAgent("reporter").Terminator().Script(Says("Report: 3 paid")),
		).Gate("plan", "planner", 1).AllowSelfApproval("plan", false).Obj()
		create(cfg)
	})

	It("waits again at the gate the earlier run waits at, for someone other than its own creator", func() {
		earlier := MakeRun("x", ns).Config(cfg.Name).Obj()
		Expect(alice.Create(ctx, earlier)).To(Succeed())
		waitForGate(earlier, "plan", 1)

		retry := from("y", "x", 1)
		Expect(alice.Create(ctx, retry)).To(Succeed())
		waiting := waitForGate(retry, "plan", 1)
		Expect(waiting.Status.StepCount).To(BeEquivalentTo(1), "no step past the gate")
		Expect(waiting.Status.PendingApproval.ApprovedBy).To(BeEmpty())
		Eventually(func() []string { return eventsOf(retry) }).Should(ContainElement(ContainSubstring("from people other than alice, who created the run")))

		Expect(annotate(alice, retry, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		Expect(decisionCondition(retry, v1alpha1.ReasonSelfApproval)).To(ContainSubstring("alice created this run"))
		Expect(get(retry).Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval))

		Expect(annotate(bob, retry, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		done := waitForEnd(retry)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(records(done)).To(Equal([]string{"Approved plan by bob"}))
		Expect(get(earlier).Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval), "the earlier run still waits")
	})

	It("waits again at a gate the earlier run was rejected at", func() {
		earlier := MakeRun("x", ns).Config(cfg.Name).Obj()
		Expect(alice.Create(ctx, earlier)).To(Succeed())
		waitForGate(earlier, "plan", 1)
		Expect(annotate(bob, earlier, v1alpha1.AnnotationReject, "plan", v1alpha1.AnnotationFeedback, "not this month")).To(Succeed())
		Expect(waitForEnd(earlier).Status.TerminationReason).To(Equal(v1alpha1.ReasonRejected))

		retry := from("y", "x", 1)
		Expect(alice.Create(ctx, retry)).To(Succeed())
		waiting := waitForGate(retry, "plan", 1)
		Expect(waiting.Status.StepCount).To(BeEquivalentTo(1))
	})

	It("passes an earlier gate that someone else approved, and not one its own creator approved", func() {
		By("bob starts a run, and alice approves its plan: she did not create it")
		approvedByAlice := MakeRun("by-bob", ns).Config(cfg.Name).Obj()
		Expect(bob.Create(ctx, approvedByAlice)).To(Succeed())
		waitForGate(approvedByAlice, "plan", 1)
		Expect(annotate(alice, approvedByAlice, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		waitForEnd(approvedByAlice)

		By("a run alice starts from after the payment does not carry her own approval past the gate")
		mine := from("mine", "by-bob", 2)
		Expect(alice.Create(ctx, mine)).To(Succeed())
		refused := waitForEnd(mine)
		Expect(refused.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(refused.Status.TerminationMessage).To(ContainSubstring("after step 1 run by-bob waited at gate plan, and its transcript records no approval of it that counts under the current config"))
		Expect(refused.Status.TerminationMessage).To(ContainSubstring("alice created this run, and gate plan needs an approver other than the run's creator"))

		By("a run bob starts from the same step does: alice's approval counts for him")
		his := from("his", "by-bob", 2)
		Expect(bob.Create(ctx, his)).To(Succeed())
		done := waitForEnd(his)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(done.Status.StepCount).To(BeEquivalentTo(3))
	})

	It("uses the config as it is now: a gate added since opens, or refuses a start past it", func() {
		editConfig(cfg, func(c *v1alpha1.AgentConfig) { c.Spec.Approvals = nil })
		earlier := MakeRun("ungated", ns).Config(cfg.Name).Obj()
		Expect(alice.Create(ctx, earlier)).To(Succeed())
		Expect(waitForEnd(earlier).Status.StepCount).To(BeEquivalentTo(3))
		Expect(waitForEnd(earlier).Status.Approvals).To(BeEmpty())

		editConfig(cfg, func(c *v1alpha1.AgentConfig) { c.Spec.Approvals = cfg.Spec.Approvals })

		past := from("past", "ungated", 2)
		Expect(alice.Create(ctx, past)).To(Succeed())
		refused := waitForEnd(past)
		Expect(refused.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(refused.Status.TerminationMessage).To(ContainSubstring("waited at gate plan, and its transcript records no approval of it"))
		Expect(refused.Status.TerminationMessage).To(ContainSubstring("start from step 1, and the gate opens for this run"))

		at := from("at", "ungated", 1)
		Expect(alice.Create(ctx, at)).To(Succeed())
		Expect(waitForGate(at, "plan", 1).Status.StepCount).To(BeEquivalentTo(1))
	})

	It("records every decision in the transcript, whole", func() {
		earlier := MakeRun("x", ns).Config(cfg.Name).Obj()
		Expect(alice.Create(ctx, earlier)).To(Succeed())
		waitForGate(earlier, "plan", 1)
		Expect(annotate(bob, earlier, v1alpha1.AnnotationApprove, "plan", v1alpha1.AnnotationFeedback, "go ahead")).To(Succeed())
		waitForEnd(earlier)
		var decided []string
		for _, rec := range transcriptOf(get(earlier)) {
			if rec.Kind == transcript.KindDecision {
				decided = append(decided, string(rec.Body))
			}
		}
		Expect(decided).To(ConsistOf(And(ContainSubstring(`"gate":"plan"`), ContainSubstring(`"decision":"Approved"`), ContainSubstring(`"by":"bob"`),
			ContainSubstring(`"feedback":"go ahead"`))))
	})
})
