// Package integration runs the operator's controllers against a real kube-apiserver and etcd
// (envtest): every status, Event and validation error here went through the API server.
package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers"
)

var (
	testEnv     *envtest.Environment
	restConfig  *rest.Config
	k8sClient   client.Client
	scheme      = runtime.NewScheme()
	stopManager func()
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Integration suite (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS is not set: run the suite with 'make test-integration', which makes kube-apiserver and etcd available")
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	restConfig, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(restConfig, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	stopManager = startManager()
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startManager runs the operator's controllers, wired as main.go wires them, until the
// returned function is called.
func startManager() func() {
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		// The restart spec starts a second manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	providers := agents.NewProviders(agents.Dependencies{Clock: clock.RealClock{}})
	Expect(controllers.Setup(mgr, providers, clock.RealClock{}, controllers.Options{
		MaxConcurrentReconciles: 4, MaxStepsInFlight: 64,
	})).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return func() {
		cancel()
		Eventually(done, 30*time.Second).Should(BeClosed())
	}
}

// newNamespace makes a namespace for one spec.
func newNamespace() string {
	ns := &corev1.Namespace{}
	ns.GenerateName = "baton-"
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
