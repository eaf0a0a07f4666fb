// Package kueuetest runs a real Kueue manager for tests: the binary hack/kueue.sh builds from
// the Go module proxy (KUEUE_BIN), against the control plane of an envtest environment, with
// Kueue's CRDs installed as its release manifests install them.
//
// Kueue runs as its release manifests run it, managing its own certificates
// (internalCertManagement): with that off, it reads its metrics certificate from a fixed path
// under /etc, which a test cannot provide. Two things a control plane without nodes or Services
// needs are done here: the certificates' Secret is written to the manager's certificate folder,
// as the kubelet mounts it in a cluster; and Kueue's webhooks are not registered with the API
// server, because their certificate names Kueue's in-cluster Service, which the API server
// cannot reach here, so nothing defaults or validates Kueue's objects but their CRDs' schemas.
package kueuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/baton-dev/baton/internal/kueue"
)

// Namespace is Kueue's own namespace, where it keeps its certificates' Secret.
const Namespace = "kueue-system"

const (
	// webhookService and webhookSecret are the names Kueue's manifests give its webhook Service
	// and its certificates' Secret, and its defaults expect.
	webhookService = "kueue-webhook-service"
	webhookSecret  = "kueue-webhook-server-cert"
	// readyTimeout bounds the wait for a started manager's readiness probe.
	readyTimeout = 90 * time.Second
	// stopTimeout bounds the wait for a stopped manager to exit before it is killed.
	stopTimeout = 15 * time.Second
)

// converted are the CRDs Kueue's manifests give a conversion webhook
// (config/components/crd/kustomization.yaml), which its certificate manager waits to inject its
// CA into. The API server calls it only to convert between the versions they serve, which
// nothing here does: every client uses v1beta2, the stored version.
var converted = map[string]bool{
	"localqueues.kueue.x-k8s.io":        true,
	"clusterqueues.kueue.x-k8s.io":      true,
	"cohorts.kueue.x-k8s.io":            true,
	"workloads.kueue.x-k8s.io":          true,
	"multikueueclusters.kueue.x-k8s.io": true,
}

// Options tune the manager.
type Options struct {
	// ExternalFrameworks are kinds, as Kind.version.group, that Kueue is told other controllers
	// manage (integrations.externalFrameworks).
	ExternalFrameworks []string
	// Output, when set, receives the manager's log as it runs, besides Manager.Log.
	Output io.Writer
}

// Manager is a running Kueue manager.
type Manager struct {
	dir    string
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
	once   sync.Once
}

// Binary is the Kueue manager the tests run: KUEUE_BIN, with its CRDs in crd/ beside it.
func Binary() (string, error) {
	bin := os.Getenv("KUEUE_BIN")
	if bin == "" {
		return "", errors.New("KUEUE_BIN is not set: run 'make test-integration', which builds Kueue's manager (hack/kueue.sh)")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("KUEUE_BIN: %w", err)
	}
	return bin, nil
}

// CRDDir is the folder of Kueue's CRDs that hack/kueue.sh puts beside the binary.
func CRDDir(bin string) string { return filepath.Join(filepath.Dir(bin), "crd") }

// InstallCRDs installs Kueue's CRDs into env's control plane, without running its manager: a
// cluster where an operator started after them finds Kueue's Workloads served.
func InstallCRDs(env *envtest.Environment) error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	return installCRDs(env, CRDDir(bin))
}

// Start installs Kueue's CRDs into env's control plane and runs Kueue's manager against it, as
// a cluster admin, until Stop. It returns once the manager reports ready.
func Start(ctx context.Context, env *envtest.Environment, opts Options) (*Manager, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := installCRDs(env, CRDDir(bin)); err != nil {
		return nil, err
	}
	if err := prepareNamespace(ctx, env); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-kueue-")
	if err != nil {
		return nil, err
	}
	m := &Manager{dir: dir, log: &lockedBuffer{}, exited: make(chan struct{})}
	health, err := m.configure(env, opts)
	if err != nil {
		m.Stop()
		return nil, err
	}
	var out io.Writer = m.log
	if opts.Output != nil {
		out = io.MultiWriter(m.log, opts.Output)
	}
	m.cmd = exec.Command(bin, "--config", filepath.Join(dir, "config.yaml"),
		"--kubeconfig", filepath.Join(dir, "kubeconfig"))
	m.cmd.Stdout, m.cmd.Stderr = out, out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		m.Stop()
		return nil, fmt.Errorf("starting Kueue's manager: %w", err)
	}
	go func() {
		_ = m.cmd.Wait()
		close(m.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := m.mountCerts(ctx, env); err != nil {
		m.Stop()
		return nil, fmt.Errorf("%w\n%s", err, tail(m.Log(), 4096))
	}
	if err := m.waitReady(ctx, health); err != nil {
		m.Stop()
		return nil, fmt.Errorf("%w\n%s", err, tail(m.Log(), 4096))
	}
	return m, nil
}

// Stop stops the manager and removes its files.
func (m *Manager) Stop() {
	m.once.Do(func() {
		if m.cmd != nil && m.cmd.Process != nil {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.exited:
			case <-time.After(stopTimeout):
				_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
				<-m.exited
			}
		}
		_ = os.RemoveAll(m.dir)
	})
}

// Log is what the manager has written so far.
func (m *Manager) Log() string { return m.log.String() }

// configure writes the manager's kubeconfig and configuration and returns the address of its
// readiness probe.
func (m *Manager) configure(env *envtest.Environment, opts Options) (string, error) {
	if err := os.Mkdir(m.certs(), 0o700); err != nil {
		return "", err
	}
	user, err := env.AddUser(envtest.User{Name: "kueue-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(m.dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		return "", err
	}
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[0])
	external := "[]"
	if len(opts.ExternalFrameworks) > 0 {
		external = "[" + strings.Join(opts.ExternalFrameworks, ", ") + "]"
	}
	// Leader election is off (one replica); metrics are off and the visibility API server too
	// (it would be an aggregated API server of its own on a fixed port).
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: %s
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
internalCertManagement:
  enable: true
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks: [batch/job]
  externalFrameworks: %s
`, Namespace, health, ports[1], m.certs(), external)
	return health, os.WriteFile(filepath.Join(m.dir, "config.yaml"), []byte(config), 0o600)
}

// certs is the manager's certificate folder (webhook.certDir).
func (m *Manager) certs() string { return filepath.Join(m.dir, "certs") }

// mountCerts waits for the manager to fill its certificates' Secret and writes the Secret's keys
// to its certificate folder, as the kubelet mounts the Secret in Kueue's Deployment: the manager
// waits for the files before it starts.
func (m *Manager) mountCerts(ctx context.Context, env *envtest.Environment) error {
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		return err
	}
	secret := &corev1.Secret{}
	err = m.poll(ctx, "filled its certificates' Secret", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: webhookSecret}, secret); err != nil {
			return false, err
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0, nil
	})
	if err != nil {
		return err
	}
	for name, data := range secret.Data {
		// Written aside and renamed, so that the manager never reads half a file.
		part := filepath.Join(m.certs(), "."+name)
		if err := os.WriteFile(part, data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(part, filepath.Join(m.certs(), name)); err != nil {
			return err
		}
	}
	return nil
}

// waitReady waits for the manager's readiness probe, which passes once its certificates are in
// place and its webhook server listens: its controllers and scheduler start with it.
func (m *Manager) waitReady(ctx context.Context, health string) error {
	probe := &http.Client{Timeout: time.Second}
	return m.poll(ctx, "ready", func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+health+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := probe.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// poll calls done until it says the manager did what is waited for, the manager exits, or ctx
// ends. done's errors are kept to say why it never was.
func (m *Manager) poll(ctx context.Context, what string, done func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := done()
		if ok {
			return nil
		}
		last = err
		select {
		case <-m.exited:
			return fmt.Errorf("the Kueue manager exited before it %s: %v", what, m.cmd.ProcessState)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("the Kueue manager never %s: %w", what, ctx.Err()), last)
		case <-tick.C:
		}
	}
}

// installCRDs installs Kueue's CRDs, those that convert with their conversion webhook as Kueue's
// manifests set it.
func installCRDs(env *envtest.Environment, dir string) error {
	opts := envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		return fmt.Errorf("reading Kueue's CRDs from %s: %w", dir, err)
	}
	if len(opts.CRDs) == 0 {
		return fmt.Errorf("no CRDs in %s: run hack/kueue.sh", dir)
	}
	for _, crd := range opts.CRDs {
		if converted[crd.Name] {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
						Namespace: Namespace, Name: webhookService, Path: new("/convert"),
					}},
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
	}
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: opts.CRDs})
	if err != nil {
		return fmt.Errorf("installing Kueue's CRDs: %w", err)
	}
	return nil
}

// prepareNamespace makes Kueue's namespace and the empty Secret its certificate manager fills,
// as Kueue's manifests do.
func prepareNamespace(ctx context.Context, env *envtest.Environment) error {
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	ns.Name = Namespace
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{}
	secret.Name, secret.Namespace = webhookSecret, Namespace
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// freePorts are n free TCP ports on loopback.
// They are held open until all are found, so that none is found twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// lockedBuffer is a buffer the manager's output goroutine writes while tests read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Queues are what a platform team sets up for a namespace's runs, in the order they are made: a
// ResourceFlavor and a ClusterQueue named after the namespace, the ClusterQueue holding runs
// agents.baton.dev/runs for the namespace alone and preempting within itself as told, and the
// LocalQueue localQueue in the namespace. Delete them in the reverse order.
func Queues(ns, localQueue string, runs int64, withinClusterQueue kueuev1beta2.PreemptionPolicy) []client.Object {
	flavor := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: kueuev1beta2.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{kueue.ResourceRuns},
				Flavors: []kueuev1beta2.FlavorQuotas{{
					Name:      kueuev1beta2.ResourceFlavorReference(ns),
					Resources: []kueuev1beta2.ResourceQuota{{Name: kueue.ResourceRuns, NominalQuota: *resource.NewQuantity(runs, resource.DecimalSI)}},
				}},
			}},
			Preemption: &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: withinClusterQueue},
		},
	}
	lq := &kueuev1beta2.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: localQueue, Namespace: ns},
		Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(ns)},
	}
	return []client.Object{flavor, cq, lq}
}
