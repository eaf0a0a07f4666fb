package integration

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// served is the object as the API server holds it.
func served(obj client.Object) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kindOf(obj)))
	ExpectWithOffset(2, k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), u)).To(Succeed())
	return u
}

// kstatusOf computes the object's status the way Flux, kpt and kubectl's kstatus users do. It
// also checks that every condition carries the generation the operator saw.
func kstatusOf(obj client.Object) status.Status {
	u := served(obj)
	res, err := status.Compute(u)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		ExpectWithOffset(1, c.(map[string]any)["observedGeneration"]).To(BeEquivalentTo(u.GetGeneration()),
			"condition %v of %s", c.(map[string]any)["type"], u.GetName())
	}
	return res.Status
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*v1alpha1.AgentConfig); ok {
		return "AgentConfig"
	}
	return "AgentRun"
}

// healthOf is what Argo CD's health check in config/argocd says of the object: its status, and
// with kstatus, the two ways GitOps tools read a run.
func healthOf(obj client.Object) string {
	script := "agentrun-health.lua"
	if kindOf(obj) == "AgentConfig" {
		script = "agentconfig-health.lua"
	}
	status, _ := argoHealth(served(obj), script)
	return status
}

var _ = Describe("Health as kstatus and Argo CD compute it", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("reads a pending, running or waiting run as InProgress, a succeeded one Current, a failed or cancelled one Failed", func() {
		cfg := MakeConfig("team", ns).Agents(
			MakeAgent("planner").HandsOffTo("worker").Script(Says("the plan").HandOff("worker")),
			MakeAgent("worker").Terminator().Script(Says("done").Delay(3*time.Second)),
		).Gate("plan", "planner", 1).Obj()

		pending := MakeRun("pending", ns).Config("not-yet").Obj()
		create(pending)
		waitForPhase(pending, v1alpha1.PhasePending)
		Expect(kstatusOf(pending)).To(Equal(status.InProgressStatus))
		Expect(healthOf(pending)).To(Equal("Progressing"))

		create(cfg)
		gated := MakeRun("gated", ns).Config(cfg.Name).Obj()
		create(gated)
		waitForGate(gated, "plan", 1)
		Expect(kstatusOf(gated)).To(Equal(status.InProgressStatus))
		Expect(healthOf(gated)).To(Equal("Suspended"))
		_, message := argoHealth(served(gated), "agentrun-health.lua")
		Expect(message).To(Equal("Waiting for approval at gate plan"))

		Expect(annotate(k8sClient, gated, v1alpha1.AnnotationApprove, "plan")).To(Succeed())
		Eventually(func() string { return get(gated).Status.CurrentAgent }, runTimeout, poll).Should(Equal("worker"))
		waitForPhase(gated, v1alpha1.PhaseRunning)
		Expect(kstatusOf(gated)).To(Equal(status.InProgressStatus))
		Expect(healthOf(gated)).To(Equal("Progressing"))

		succeeded := waitForEnd(gated)
		Expect(succeeded.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		Expect(kstatusOf(succeeded)).To(Equal(status.CurrentStatus))
		Expect(healthOf(succeeded)).To(Equal("Healthy"))

		cancelled := MakeRun("cancelled", ns).Config(cfg.Name).Obj()
		create(cancelled)
		waitForGate(cancelled, "plan", 1)
		Expect(annotate(k8sClient, cancelled, v1alpha1.AnnotationCancel, "not needed")).To(Succeed())
		Expect(waitForEnd(cancelled).Status.Phase).To(Equal(v1alpha1.PhaseCancelled))
		Expect(kstatusOf(cancelled)).To(Equal(status.FailedStatus))
		Expect(healthOf(cancelled)).To(Equal("Degraded"))

		looping := MakeConfig("loop", ns).Agents(
			MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
			MakeAgent("b").HandsOffTo("a").Script(Says("to a").HandOff("a")),
		).MaxSteps(3).Obj()
		failed := MakeRun("failed", ns).Config(looping.Name).Obj()
		create(looping, failed)
		Expect(waitForEnd(failed).Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		Expect(kstatusOf(failed)).To(Equal(status.FailedStatus))
		Expect(healthOf(failed)).To(Equal("Degraded"))
	})

	It("reads a config runs can start with as Current, and one they cannot as Failed", func() {
		good := MakeConfig("good", ns).Agents(MakeAgent("a").Script(Says("{}"))).Obj()
		bad := MakeConfig("bad", ns).Agents(MakeAgent("a").Script(Says("{}"))).Obj()
		bad.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type": 12}`)}
		create(good, bad)
		Eventually(func() status.Status { return kstatusOf(good) }, runTimeout, poll).Should(Equal(status.CurrentStatus))
		Eventually(func() status.Status { return kstatusOf(bad) }, runTimeout, poll).Should(Equal(status.FailedStatus))
		Expect(healthOf(good)).To(Equal("Healthy"))
		Expect(healthOf(bad)).To(Equal("Degraded"))
	})
})
