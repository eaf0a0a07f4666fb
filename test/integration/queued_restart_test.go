package integration

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// quotaUse waits until the quota's status counts running runs at work and queued in line.
func quotaUse(ns, name string, running, queued int32) {
	EventuallyWithOffset(1, func(g Gomega) {
		q := &v1alpha1.AgentQuota{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, q)).To(Succeed())
		g.Expect(q.Status.Running).To(Equal(running), "running")
		g.Expect(q.Status.Queued).To(Equal(queued), "queued")
	}, runTimeout, poll).Should(Succeed())
}

// stillQueued checks for a while that none of the runs leaves phase Queued or takes a step.
func stillQueued(runs ...*v1alpha1.AgentRun) {
	ConsistentlyWithOffset(1, func(g Gomega) {
		for _, r := range runs {
			cur := get(r)
			g.Expect(cur.Status.Phase).To(Equal(v1alpha1.PhaseQueued), r.Name)
			g.Expect(cur.Status.StartTime).To(BeNil(), r.Name)
			g.Expect(cur.Status.StepCount).To(BeZero(), r.Name)
		}
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed())
}

var _ = Describe("A run queued by an AgentQuota", func() {
	It("keeps its place in line across an operator restart, and can then be cancelled or start when a place frees", func() {
		ns := newNamespace()
		// A run waiting at the gate after writer holds the quota's one place until approved.
		cfg := MakeConfig("gated", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).Obj()
		create(quotaNamed(ns, "team-a", v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](1)}), cfg)
		first := MakeRun("first", ns).Config(cfg.Name).Obj()
		create(first)
		waitForGate(first, "review", 1)

		second := MakeRun("second", ns).Config(cfg.Name).Obj()
		create(second)
		waitQueued(second, `quota "team-a": 1 of 1 runs running; place 1 of 1 in line`)
		third := MakeRun("third", ns).Config(cfg.Name).Obj()
		create(third)
		waitQueued(third, `quota "team-a": 1 of 1 runs running; place 2 of 2 in line`)
		quotaUse(ns, "team-a", 1, 2)

		By("stopping the operator while two runs wait in line")
		stopManager()
		restarted := false
		DeferCleanup(func() {
			if !restarted { // the spec failed while the operator was stopped: the specs after it need one
				stopManager = startManager(controllerOptions)
			}
		})
		stillQueued(second, third)
		Expect(get(first).Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval))

		By("starting it again: the line is read again from the runs, in the same order")
		stopManager, restarted = startManager(controllerOptions), true
		// The restarted operator writes each queued run's place afresh: second's now counts third
		// behind it, which the stopped one had not written yet (a place is rewritten at most every
		// 30 seconds).
		waitQueued(second, `quota "team-a": 1 of 1 runs running; place 1 of 2 in line`)
		waitQueued(third, `quota "team-a": 1 of 1 runs running; place 2 of 2 in line`)
		stillQueued(second, third)
		Expect(get(first).Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval), "the first run still holds the place")
		quotaUse(ns, "team-a", 1, 2)
		Expect(eventsOf(second)).To(ConsistOf(ContainSubstring("Normal Queued: ")), "one Queued Event: the restart did not queue it again")

		By("cancelling the head of the line: it ends without starting, and frees no place")
		Expect(annotate(k8sClient, second, v1alpha1.AnnotationCancel, "not needed")).To(Succeed())
		cancelled := waitForEnd(second)
		Expect(cancelled.Status.Phase).To(Equal(v1alpha1.PhaseCancelled))
		Expect(cancelled.Status.TerminationReason).To(Equal(v1alpha1.ReasonCancelled))
		Expect(cancelled.Status.StepCount).To(BeZero(), "a queued run took no step")
		stillQueued(third)
		quotaUse(ns, "team-a", 1, 1)

		By("ending the first run: the run left in line starts and completes")
		Expect(annotate(alice, first, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(first).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		waitForGate(third, "review", 1)
		Expect(annotate(alice, third, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		done := waitForEnd(third)
		Expect(done.Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted), done.Status.TerminationMessage)
		Expect(done.Status.StepCount).To(BeEquivalentTo(2))
		Expect(done.Status.Output).To(Equal("published"))
		quotaUse(ns, "team-a", 0, 0)
	})
})
