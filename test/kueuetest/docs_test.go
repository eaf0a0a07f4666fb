package kueuetest_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/kueue"
)

var _ = Describe("docs/kueue.md", func() {
	It("shows objects the API server takes, and a run Kueue admits from the queues it sets up", func() {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "kueue.md"))
		Expect(err).NotTo(HaveOccurred())
		var objs []*unstructured.Unstructured
		for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
			dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(block[1]), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
					break
				} else {
					Expect(err).NotTo(HaveOccurred())
				}
				if len(u.Object) > 0 {
					objs = append(objs, u)
				}
			}
		}
		Expect(objs).To(HaveLen(6), "a ResourceFlavor, a ClusterQueue, a LocalQueue, an AgentRun, an AgentQuota and a cohort's ClusterQueue")

		ns := &corev1.Namespace{}
		ns.Name = "team-a"
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())
		var run *v1alpha1.AgentRun
		for _, u := range objs {
			Expect(k8sClient.Create(ctx, u)).To(Succeed(), "creating the %s %s", u.GetKind(), u.GetName())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, u))).To(Succeed()) })
			if u.GetKind() == "AgentRun" {
				run = &v1alpha1.AgentRun{}
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, run)).To(Succeed())
			}
		}
		Expect(run).NotTo(BeNil())
		Expect(k8sClient.Create(ctx, kueue.WorkloadFor(run, kueue.Ask{Queue: run.Labels[kueue.QueueLabel], Priority: run.Spec.Priority}))).To(Succeed())
		Eventually(func() decision { return decisionOf(run) }, timeout, poll).Should(Equal(
			decision{Admitted: true, Message: "admitted by ClusterQueue agents"}))
	})
})
