package integration

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/internal/webhook"
)

// The operator takes who decided, and who created a run, from the admission webhook's stamps
// only where it sees the webhook installed.
var _ = Describe("Whether the admission webhook is installed", func() {
	It("is seen by a dry-run create of a run: stamped where the webhook runs, not where it does not", func() {
		operator, err := client.New(operatorConfig, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace()
		installed, why := webhook.Installed(ctx, operator, ns)
		Expect(installed).To(BeTrue(), why)

		By("leaving the namespace out of the webhook's reach")
		nsObj := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels["baton-test/unguarded"] = "true"
		Expect(k8sClient.Update(ctx, nsObj)).To(Succeed())
		hooks := &admissionregistrationv1.MutatingWebhookConfigurationList{}
		Expect(k8sClient.List(ctx, hooks)).To(Succeed())
		var hook *admissionregistrationv1.MutatingWebhookConfiguration
		for i := range hooks.Items {
			for _, w := range hooks.Items[i].Webhooks {
				if w.Name == webhook.Name {
					hook = &hooks.Items[i]
				}
			}
		}
		Expect(hook).NotTo(BeNil())
		original := hook.DeepCopy()
		for i := range hook.Webhooks {
			hook.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "baton-test/unguarded", Operator: metav1.LabelSelectorOpDoesNotExist}}}
		}
		Expect(k8sClient.Update(ctx, hook)).To(Succeed())
		DeferCleanup(func() {
			latest := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(original), latest)).To(Succeed())
			latest.Webhooks = original.Webhooks
			Expect(k8sClient.Update(ctx, latest)).To(Succeed())
		})

		Eventually(func() string {
			_, why := webhook.Installed(ctx, operator, ns)
			return why
		}).Should(ContainSubstring("came back without its creator recorded: the admission webhook decisions.agents.baton.dev is not installed"))
		installed, why = webhook.Installed(ctx, operator, "default")
		Expect(installed).To(BeTrue(), "other namespaces are still guarded: %s", why)
	})
})
