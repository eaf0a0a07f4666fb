package integration

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/kueue"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/kueuetest"
)

// Runs labelled with a LocalQueue, admitted by a real Kueue manager (hack/kueue.sh) that runs
// for these specs only. The operator makes, watches and finishes the runs' Workloads.
var _ = Describe("Runs on a Kueue LocalQueue", Ordered, func() {
	var manager *kueuetest.Manager
	BeforeAll(func() {
		var err error
		manager, err = kueuetest.Start(ctx, testEnv, kueuetest.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(manager.Stop)
	})
	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			log := manager.Log()
			AddReportEntry("Kueue manager log", log[max(0, len(log)-16384):])
		}
	})

	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// gated runs wait at a gate after writer: a run waiting for people holds its admission.
	gated := func() *v1alpha1.AgentConfig {
		return MakeConfig("gated", ns).Agents(
			MakeAgent("writer").HandsOffTo("publisher").Script(Says("draft").HandOff("publisher")),
			MakeAgent("publisher").Terminator().Script(Says("published")),
		).Gate("review", "writer", 1).Obj()
	}
	queued := func(name string, priority int32) *v1alpha1.AgentRun {
		run := MakeRun(name, ns).Config("gated").Obj()
		run.Labels = map[string]string{kueue.QueueLabel: "agents"}
		run.Spec.Priority = ptr.To(priority)
		return run
	}

	It("wait Queued until Kueue admits their Workloads, and give the quota back when they end", func() {
		kueueQueues(ns, 1)
		create(gated())
		first := queued("first", 0)
		create(first)
		waitForGate(first, "review", 1)
		wl := workloadOf(first)
		Expect(wl.Spec.QueueName).To(BeEquivalentTo("agents"))
		Expect(metav1.IsControlledBy(wl, get(first))).To(BeTrue(), "the run controls its Workload")

		second := queued("second", 0)
		create(second)
		waitAwaitingAdmission(second, "insufficient unused quota for agents.baton.dev/runs")
		Eventually(func() []string { return eventsOf(second) }).Should(ContainElement(ContainSubstring("Kueue: ")))

		Expect(annotate(alice, first, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(first).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(workloadOf(first).Status.Conditions, kueuev1beta2.WorkloadFinished)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("Succeeded"))
			g.Expect(c.Message).To(HavePrefix("Completed: "))
		}, runTimeout, poll).Should(Succeed())
		waitForGate(second, "review", 1)
		Expect(annotate(alice, second, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(second).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})

	It("stop a run that Kueue evicts for one of higher priority, which then runs", func() {
		kueueQueues(ns, 1)
		create(gated())
		low := queued("low", 0)
		create(low)
		waitForGate(low, "review", 1)
		// Kueue preempts for a workload it finds it cannot admit; it must see the low run's
		// Workload admitted first, or it parks the high one until the queue next changes.
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(workloadOf(low).Status.Conditions, kueuev1beta2.WorkloadAdmitted)
		}, runTimeout, poll).Should(BeTrue())

		high := queued("high", 10)
		create(high)
		low = waitForEndWithin(low, 3*runTimeout)
		Expect(low.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		Expect(low.Status.TerminationReason).To(Equal(v1alpha1.ReasonEvicted))
		Expect(low.Status.TerminationMessage).To(HavePrefix("Kueue took back the run's admission: Workload evicted (Preempted): "))
		waitForGate(high, "review", 1)
		Expect(annotate(alice, high, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(high).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
	})

	It("hold a run started from an earlier run's step for Kueue as any other", func() {
		kueueQueues(ns, 1)
		create(gated())
		first := queued("first", 0)
		create(first)
		waitForGate(first, "review", 1)

		again := queued("again", 0)
		again.Spec.From = &v1alpha1.RunFrom{Run: "first", Step: 1}
		create(again)
		waitAwaitingAdmission(again, "insufficient unused quota for agents.baton.dev/runs")
		Expect(annotate(alice, first, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		waitForEnd(first)
		Eventually(func() v1alpha1.RunPhase { return get(again).Status.Phase }, runTimeout, poll).
			ShouldNot(BeElementOf(v1alpha1.PhaseQueued, v1alpha1.PhasePending), "the run starts once Kueue admits it")
		Expect(get(again).Status.TerminationReason).NotTo(Equal(v1alpha1.ReasonConfigInvalid), get(again).Status.TerminationMessage)
	})

	It("keep a run waiting, saying so, while its LocalQueue does not exist, and start it once it does", func() {
		create(gated())
		run := queued("r", 0)
		create(run)
		waitAwaitingAdmission(run, "LocalQueue agents doesn't exist")
		kueueQueues(ns, 1)
		waitForGate(run, "review", 1)
	})

	It("admit every run of a namespace whose quota says admission: Kueue, labelled or not, at a priority its quota allows", func() {
		kueueQueues(ns, 1)
		low := &kueuev1beta2.WorkloadPriorityClass{Value: 100}
		low.Name = ns + "-low"
		create(gated(), low, quotaNamed(ns, "kueue", v1alpha1.AgentQuotaSpec{Admission: v1alpha1.AdmissionKueue,
			DefaultQueue: ptr.To("agents"), PriorityClasses: []string{low.Name}}))
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, low))).To(Succeed()) })

		// An unlabelled run asking for the highest priority there is goes to the default queue,
		// at the one class the namespace may use.
		first := MakeRun("first", ns).Config("gated").Obj()
		first.Spec.Priority = ptr.To[int32](1000000)
		create(first)
		waitForGate(first, "review", 1)
		wl := workloadOf(first)
		Expect(wl.Spec.QueueName).To(BeEquivalentTo("agents"))
		Expect(wl.Spec.Priority).To(HaveValue(BeEquivalentTo(100)))
		Expect(wl.Spec.PriorityClassRef).To(Equal(kueuev1beta2.NewWorkloadPriorityClassRef(low.Name)))
		k := get(first).Status.Kueue
		Expect(k).NotTo(BeNil())
		Expect(*k).To(Equal(v1alpha1.KueueAdmission{Workload: wl.Name, Queue: "agents", PriorityClassName: low.Name, Priority: ptr.To[int32](100), Admitted: true}))

		// A run that waits for Kueue keeps waiting when its label is taken away.
		second := queued("second", 0)
		create(second)
		waitAwaitingAdmission(second, "insufficient unused quota for agents.baton.dev/runs")
		Eventually(func() *v1alpha1.KueueAdmission { return get(second).Status.Kueue }, runTimeout, poll).ShouldNot(BeNil())
		patch := client.MergeFrom(get(second))
		unlabelled := get(second)
		delete(unlabelled.Labels, kueue.QueueLabel)
		Expect(k8sClient.Patch(ctx, unlabelled, patch)).To(Succeed())
		Consistently(func() v1alpha1.RunPhase { return get(second).Status.Phase }, 3*time.Second, poll).Should(Equal(v1alpha1.PhaseQueued))

		// The admitted run ends and finishes its Workload, though nothing labels it.
		Expect(annotate(alice, first, v1alpha1.AnnotationApprove, "review")).To(Succeed())
		Expect(waitForEnd(first).Status.TerminationReason).To(Equal(v1alpha1.ReasonCompleted))
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(workloadOf(first).Status.Conditions, kueuev1beta2.WorkloadFinished)
		}, runTimeout, poll).ShouldNot(BeNil())
		waitForGate(second, "review", 1)
	})

	It("end a run whose queue label no LocalQueue can have, ConfigInvalid", func() {
		create(gated())
		run := queued("r", 0)
		run.Labels[kueue.QueueLabel] = "Agents_A"
		create(run)
		run = waitForEnd(run)
		Expect(run.Status.TerminationReason).To(Equal(v1alpha1.ReasonConfigInvalid))
		Expect(run.Status.TerminationMessage).To(HavePrefix(`the label kueue.x-k8s.io/queue-name="Agents_A" names no LocalQueue Kueue can have`))
	})
})

// waitAwaitingAdmission waits for the run to be Queued for Kueue's admission, with Kueue's
// message saying msg.
func waitAwaitingAdmission(run *v1alpha1.AgentRun, msg string) {
	EventuallyWithOffset(1, func(g Gomega) {
		st := get(run).Status
		g.Expect(st.Phase).To(Equal(v1alpha1.PhaseQueued))
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonAwaitingAdmission))
		g.Expect(c.Message).To(And(HavePrefix("Kueue: "), ContainSubstring(msg)))
	}, runTimeout, poll).Should(Succeed())
}

func workloadOf(run *v1alpha1.AgentRun) *kueuev1beta2.Workload {
	wl := &kueuev1beta2.Workload{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: kueue.WorkloadName(get(run))}, wl)).To(Succeed())
	return wl
}

// kueueQueues sets up the namespace's queues (kueuetest.Queues): the LocalQueue agents, on a
// ClusterQueue holding runs agents.baton.dev/runs that preempts lower priorities for higher.
func kueueQueues(ns string, runs int64) {
	objs := kueuetest.Queues(ns, "agents", runs, kueuev1beta2.PreemptionPolicyLowerPriority)
	create(objs...)
	DeferCleanup(func() {
		for _, o := range slices.Backward(objs) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
		}
	})
}
