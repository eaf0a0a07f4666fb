package kueuetest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/test/kueuetest"
)

// The suite holds Baton's Kueue workloads (internal/kueue) to a real Kueue manager on a real
// kube-apiserver and etcd: what Kueue admits, evicts and frees is Kueue's own doing. Baton's
// operator does not run here: the specs make and finish the Workloads as its reconciler would.
var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	manager   *kueuetest.Manager
	scheme    = runtime.NewScheme()
	ctx       = context.Background()
)

func TestKueue(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Kueue suite (envtest and a real Kueue manager)")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS is not set: run the suite with 'make test-integration', which makes kube-apiserver and etcd available")
	_, err := kueuetest.Binary()
	Expect(err).NotTo(HaveOccurred())
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(kueuev1beta2.AddToScheme(scheme))

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(testEnv.Stop)
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	manager, err = kueuetest.Start(ctx, testEnv, kueuetest.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
})

// A failed spec shows what Kueue's manager said.
var _ = AfterEach(func() {
	if CurrentSpecReport().Failed() && manager != nil {
		log := manager.Log()
		if len(log) > 16384 {
			log = "…" + log[len(log)-16384:]
		}
		AddReportEntry("Kueue manager log", log)
	}
})
