package kueuetest_test

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/kueue"
	"github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/kueuetest"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
	// localQueue is the LocalQueue each spec's runs are labelled with.
	localQueue = "agents"
)

var _ = Describe("Runs admitted by Kueue", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("admits as many runs at once as the ClusterQueue holds agents.baton.dev/runs, and the next when one finishes", func() {
		queues(ns, 2, kueuev1beta2.PreemptionPolicyNever)
		runs := []*v1alpha1.AgentRun{queuedRun(ns, "a", nil), queuedRun(ns, "b", nil), queuedRun(ns, "c", nil)}

		var admitted []*v1alpha1.AgentRun
		var waiting *v1alpha1.AgentRun
		Eventually(func(g Gomega) {
			admitted, waiting = nil, nil
			for _, r := range runs {
				if d := decisionOf(r); d.Admitted {
					g.Expect(d.Message).To(Equal("admitted by ClusterQueue " + ns))
					admitted = append(admitted, r)
				} else {
					g.Expect(d.Evicted).To(BeFalse())
					g.Expect(d.Message).To(ContainSubstring("insufficient unused quota for agents.baton.dev/runs"))
					waiting = r
				}
			}
			g.Expect(admitted).To(HaveLen(2))
		}, timeout, poll).Should(Succeed())
		// Kueue itself holds the third back: two reserve the quota, one is pending.
		Eventually(usage(ns), timeout, poll).Should(Equal(cqUsage{Reserving: 2, Pending: 1, Runs: "2"}))
		Expect(decisionOf(waiting).Admitted).To(BeFalse())

		finish(admitted[0], "Succeeded", "Completed: the writer answered")
		Eventually(func() decision { return decisionOf(waiting) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
		Expect(decisionOf(admitted[0])).To(Equal(decision{Evicted: true, Message: "Workload finished (Succeeded): Completed: the writer answered"}))
		Expect(decisionOf(admitted[1]).Admitted).To(BeTrue())
		Eventually(usage(ns), timeout, poll).Should(Equal(cqUsage{Reserving: 2, Runs: "2"}))
	})

	It("gives a deleted run's quota to the next run", func() {
		queues(ns, 1, kueuev1beta2.PreemptionPolicyNever)
		first := queuedRun(ns, "first", nil)
		Eventually(func() decision { return decisionOf(first) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
		next := queuedRun(ns, "next", nil)
		Eventually(usage(ns), timeout, poll).Should(Equal(cqUsage{Reserving: 1, Pending: 1, Runs: "1"}))

		// The run controls its Workload, so that the garbage collector deletes it with the run;
		// envtest runs no garbage collector, so the spec deletes both.
		wl := workloadOf(first)
		Expect(metav1.GetControllerOf(wl)).To(HaveField("UID", first.UID))
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Expect(k8sClient.Delete(ctx, wl)).To(Succeed())
		Eventually(func() decision { return decisionOf(next) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
	})

	It("evicts a lower-priority run for a higher one, and admits the higher once the evicted run's Workload is finished", func() {
		queues(ns, 1, kueuev1beta2.PreemptionPolicyLowerPriority)
		low := queuedRun(ns, "low", ptr.To[int32](0))
		Eventually(func() decision { return decisionOf(low) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
		high := queuedRun(ns, "high", ptr.To[int32](10))

		Eventually(func() decision { return decisionOf(low) }, timeout, poll).Should(And(
			HaveField("Evicted", BeTrue()),
			HaveField("Message", HavePrefix("Workload evicted (Preempted): Preempted to accommodate a workload"))))
		// The evicted run still holds its quota until it stops.
		Expect(decisionOf(high).Admitted).To(BeFalse())

		finish(low, "Failed", "evicted by Kueue")
		Eventually(func() decision { return decisionOf(high) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
	})

	It("evicts the run of a deactivated Workload", func() {
		queues(ns, 1, kueuev1beta2.PreemptionPolicyNever)
		run := queuedRun(ns, "r", nil)
		Eventually(func() decision { return decisionOf(run) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
		next := queuedRun(ns, "next", nil)

		wl := workloadOf(run)
		wl.Spec.Active = ptr.To(false)
		Expect(k8sClient.Update(ctx, wl)).To(Succeed())
		Eventually(func() decision { return decisionOf(run) }, timeout, poll).Should(Equal(
			decision{Evicted: true, Message: "Workload evicted (Deactivated): The workload is deactivated"}))

		finish(run, "Failed", "deactivated")
		Eventually(func() decision { return decisionOf(next) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
	})

	It("admits runs in a namespace whose LimitRange gives containers CPU and memory, with no quota of them", func() {
		limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}}
		limits.Spec.Limits = []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		}}
		Expect(k8sClient.Create(ctx, limits)).To(Succeed())
		queues(ns, 1, kueuev1beta2.PreemptionPolicyNever)
		run := queuedRun(ns, "r", nil)
		Eventually(func() decision { return decisionOf(run) }, timeout, poll).Should(HaveField("Admitted", BeTrue()))
	})

	It("keeps a run labelled with a LocalQueue that does not exist waiting, and says so", func() {
		run := builders.MakeRun("r", ns).Config("team").Input("x").Obj()
		run.Labels = map[string]string{kueue.QueueLabel: "nowhere"}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		Expect(k8sClient.Create(ctx, kueue.WorkloadFor(run, kueue.Ask{Queue: run.Labels[kueue.QueueLabel], Priority: run.Spec.Priority}))).To(Succeed())
		Eventually(func() decision { return decisionOf(run) }, timeout, poll).Should(Equal(decision{Message: "LocalQueue nowhere doesn't exist"}))
	})
})

// decision is what kueue.Admission says of a run's Workload.
type decision struct {
	Admitted, Evicted bool
	Message           string
}

func decisionOf(run *v1alpha1.AgentRun) decision {
	wl := &kueuev1beta2.Workload{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: kueue.WorkloadName(run)}, wl)
	if apierrors.IsNotFound(err) {
		wl = nil
	} else {
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
	}
	admitted, evicted, message := kueue.Admission(wl)
	return decision{Admitted: admitted, Evicted: evicted, Message: message}
}

func workloadOf(run *v1alpha1.AgentRun) *kueuev1beta2.Workload {
	wl := &kueuev1beta2.Workload{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: kueue.WorkloadName(run)}, wl)).To(Succeed())
	return wl
}

// queuedRun makes a run labelled with the namespace's LocalQueue, and its Workload, as Baton's
// reconciler makes it.
func queuedRun(ns, name string, priority *int32) *v1alpha1.AgentRun {
	run := builders.MakeRun(name, ns).Config("team").Input("review the change").Obj()
	run.Labels = map[string]string{kueue.QueueLabel: localQueue}
	run.Spec.Priority = priority
	ExpectWithOffset(1, k8sClient.Create(ctx, run)).To(Succeed())
	ExpectWithOffset(1, k8sClient.Create(ctx, kueue.WorkloadFor(run, kueue.Ask{Queue: run.Labels[kueue.QueueLabel], Priority: run.Spec.Priority}))).To(Succeed())
	return run
}

// finish marks the run's Workload Finished, as Baton's reconciler does when the run ends.
func finish(run *v1alpha1.AgentRun, reason, message string) {
	EventuallyWithOffset(1, func() error {
		wl := workloadOf(run)
		if !kueue.Finished(wl, reason, message, time.Now()) {
			return nil
		}
		return k8sClient.Status().Update(ctx, wl)
	}, timeout, poll).Should(Succeed())
}

// queues sets up the namespace's queues (kueuetest.Queues), preempting within the ClusterQueue
// as told, and deletes them after the spec.
func queues(ns string, runs int64, withinClusterQueue kueuev1beta2.PreemptionPolicy) {
	objs := kueuetest.Queues(ns, localQueue, runs, withinClusterQueue)
	for _, o := range objs {
		ExpectWithOffset(1, k8sClient.Create(ctx, o)).To(Succeed())
	}
	DeferCleanup(func() {
		for _, o := range slices.Backward(objs) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
		}
	})
}

// cqUsage is what a ClusterQueue's status says of its Workloads and its runs in use.
type cqUsage struct {
	Reserving, Pending int32
	Runs               string
}

func usage(name string) func(g Gomega) cqUsage {
	return func(g Gomega) cqUsage {
		cq := &kueuev1beta2.ClusterQueue{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, cq)).To(Succeed())
		u := cqUsage{Reserving: cq.Status.ReservingWorkloads, Pending: cq.Status.PendingWorkloads}
		for _, f := range cq.Status.FlavorsReservation {
			for _, r := range f.Resources {
				if r.Name == kueue.ResourceRuns {
					u.Runs = r.Total.String()
				}
			}
		}
		return u
	}
}

func newNamespace() string {
	ns := &corev1.Namespace{}
	ns.GenerateName = "kueue-"
	ExpectWithOffset(1, k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
