// Package integration runs the operator's controllers against a real kube-apiserver and etcd
// (envtest): every status, Event and validation error here went through the API server.
package integration

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/operator"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/test/fakes"
	"github.com/baton-dev/baton/test/kueuetest"
	"github.com/baton-dev/baton/test/pgtest"
)

var (
	testEnv    *envtest.Environment
	restConfig *rest.Config
	// operatorConfig is the operator's identity: a user bound to exactly the ClusterRole that
	// config/rbac ships, so that every spec also checks that the operator needs no more.
	operatorConfig *rest.Config
	// webhookConfig is the webhook replicas' identity: a user bound to exactly the ClusterRole
	// config/rbac ships for them, so that every decision also checks that they need no more.
	webhookConfig *rest.Config
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
	utilruntime.Must(operator.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	}
	var err error
	restConfig, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = clientFor(envtest.User{Name: "tester", Groups: []string{"system:masters"}})
	operatorConfig = operatorIdentity()
	webhookConfig = webhookIdentity()
	// One store for the suite, so that a restarted manager finds what the stopped one recorded:
	// PostgreSQL here (a real server on loopback), SQLite in the e2e suite and the quickstart, so
	// that the operator runs on both.
	pg, err := pgtest.Start(context.Background())
	Expect(err).NotTo(HaveOccurred(), "starting PostgreSQL for the transcript (make test-integration installs it)")
	DeferCleanup(pg.Stop)
	dsn, err := pg.Database(context.Background(), "integration")
	Expect(err).NotTo(HaveOccurred())
	controllerOptions.Transcript, err = sqlstore.Open(context.Background(), dsn)
	Expect(err).NotTo(HaveOccurred())
	// The suite's model servers, agents and tools are fakes on 127.0.0.1, which the egress
	// policy refuses unless it is allowed, as the manager's --egress-allow=127.0.0.1 would; the
	// rest of loopback stays refused, and names resolve at a DNS server of the suite's.
	suiteDNS, err = fakes.NewDNS(suiteHosts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(suiteDNS.Close)
	policy, err := egress.New([]string{"127.0.0.1"}, nil)
	Expect(err).NotTo(HaveOccurred())
	controllerOptions.Egress = policy.WithResolver(suiteDNS.Resolver())
	// The webhook is served apart from the controllers, as by a second replica: the
	// controllers can stop while people keep deciding.
	// Kueue's CRDs are there before the operator starts, as in a cluster that runs Kueue: the
	// operator watches the Workloads it makes. Kueue's manager runs for the specs that need it.
	Expect(kueuetest.InstallCRDs(testEnv)).To(Succeed(), "installing Kueue's CRDs (make test-integration builds them: hack/kueue.sh)")
	stopWebhook = startManager(operator.Options{EnableWebhooks: true, DisableControllers: true, OperatorUser: operatorUser})
	stopManager = startManager(controllerOptions)
})

// controllerOptions run the controllers as a replica beside the webhook's does.
var controllerOptions = operator.Options{MaxConcurrentReconciles: 4, MaxStepsInFlight: 64, TrustDecisionQueue: true,
	StatusBatchPeriod: operator.DefaultStatusBatchPeriod,
	TranscriptSweep:   500 * time.Millisecond, TranscriptAddr: "127.0.0.1:0", TranscriptReauthorize: time.Second,
	TranscriptListening: func(addr string) { transcriptAddr.Store(addr) }}

// suiteDNS answers the names of suiteHosts to the operator.
var suiteDNS *fakes.DNS

// suiteHosts are names that resolve where a spec needs them to.
var suiteHosts = map[string][]netip.Addr{
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	"internal.test": {netip.MustParseAddr("127.0.0.2")},
}

// transcriptAddr is where the running manager serves the transcript API.
var transcriptAddr atomic.Value

// refusedWrites counts the operator's status writes that the API server refused for any reason
// but a conflict or a deleted object: a status the API refuses leaves its run stuck.
var refusedWrites atomic.Int64

// statusWrites counts the operator's accepted status writes of each run, by its key.
var statusWrites sync.Map

// writesOf is how many status writes of the run the API server accepted.
func writesOf(run *v1alpha1.AgentRun) int64 {
	if n, ok := statusWrites.Load(client.ObjectKeyFromObject(run)); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// countingRefusedWrites is the manager's client, counting refused status writes.
func countingRefusedWrites(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.NewWithWatch(cfg, opts)
	if err != nil {
		return nil, err
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if err == nil && sub == "status" {
				n, _ := statusWrites.LoadOrStore(client.ObjectKeyFromObject(obj), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
			// A write cut short by the manager's stop was not refused: the API server never
			// answered it.
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
				refusedWrites.Add(1)
				GinkgoWriter.Printf("The API server refused a %s write of %s: %v\n", sub, client.ObjectKeyFromObject(obj), err)
			}
			return err
		},
	}), nil
}

var _ = AfterSuite(func() {
	Expect(refusedWrites.Load()).To(BeZero(), "status writes the API server refused")
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
func startManager(opts operator.Options) func() {
	w := testEnv.WebhookInstallOptions
	identity := operatorConfig
	if opts.DisableControllers {
		identity = webhookConfig
	}
	served, err := operator.KueueServed(identity)
	Expect(err).NotTo(HaveOccurred())
	opts.Kueue = served
	mgr, err := ctrl.NewManager(identity, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  operator.CacheOptions(opts.SecretNamespaces, opts.Kueue),
		WebhookServer:          webhook.NewServer(webhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}),
		// The restart spec starts a second manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient:  countingRefusedWrites,
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	Expect(operator.Setup(ctx, mgr, agents.Dependencies{}, clock.RealClock{}, opts)).To(Succeed())
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

// operatorIdentity binds a user to the operator's ClusterRole from config/rbac/role.yaml and
// returns its credentials.
func operatorIdentity() *rest.Config {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(data, role)).To(Succeed())
	role.Name = "baton-manager-under-test"
	Expect(k8sClient.Create(context.Background(), role)).To(Succeed())
	const user = operatorUser
	Expect(k8sClient.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
	// Client certificates are checked against the cluster's client CA, which the operator reads
	// as aggregated API servers do (docs/transcript.md).
	Expect(k8sClient.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "baton-auth-reader", Namespace: "kube-system"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
	au, err := testEnv.AddUser(envtest.User{Name: user}, nil)
	Expect(err).NotTo(HaveOccurred())
	return au.Config()
}

// operatorUser is the user the operator's controllers act as.
const operatorUser = "baton-operator"

// webhookIdentity binds a user of its own to the webhook replicas' ClusterRole from
// config/rbac/webhook_role.yaml and returns its credentials.
func webhookIdentity() *rest.Config {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "webhook_role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(data, role)).To(Succeed())
	role.Name = "baton-webhook-under-test"
	Expect(k8sClient.Create(context.Background(), role)).To(Succeed())
	const user = "baton-webhook"
	Expect(k8sClient.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
	au, err := testEnv.AddUser(envtest.User{Name: user}, nil)
	Expect(err).NotTo(HaveOccurred())
	return au.Config()
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
