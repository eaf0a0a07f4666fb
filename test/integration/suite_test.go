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
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers"
)

var (
	testEnv    *envtest.Environment
	restConfig *rest.Config
	// k8sClient acts as a cluster admin who is not the operator.
	k8sClient   client.Client
	scheme      = runtime.NewScheme()
	stopManager func()
	stopWebhook func()
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
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	}
	var err error
	restConfig, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = clientFor(envtest.User{Name: "tester", Groups: []string{"system:masters"}})
	// The webhook is served apart from the controllers, as by a second replica: the
	// controllers can stop while people keep deciding.
	stopWebhook = startManager(controllers.Options{EnableWebhooks: true, DisableControllers: true})
	stopManager = startManager(controllerOptions)
})

// controllerOptions run the controllers as a replica beside the webhook's does.
var controllerOptions = controllers.Options{MaxConcurrentReconciles: 4, MaxStepsInFlight: 64, TrustDecisionQueue: true}

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	if stopWebhook != nil {
		stopWebhook()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startManager runs the operator, wired as main.go wires it, until the returned function is
// called.
func startManager(opts controllers.Options) func() {
	w := testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		WebhookServer:          webhook.NewServer(webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}),
		// The restart spec starts a second manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	Expect(controllers.Setup(ctx, mgr, agents.Dependencies{}, clock.RealClock{}, opts)).To(Succeed())
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

// clientFor is a client that acts as the user.
func clientFor(u envtest.User) client.Client {
	au, err := testEnv.AddUser(u, nil)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(au.Config(), client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// newNamespace makes a namespace for one spec.
func newNamespace() string {
	ns := &corev1.Namespace{}
	ns.GenerateName = "baton-"
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
