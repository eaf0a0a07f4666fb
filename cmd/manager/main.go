// Command manager runs the Baton operator: the AgentRun controller that advances multi-agent
// runs one agent step at a time.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/operator"
	"github.com/baton-dev/baton/internal/telemetry"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

var scheme = runtime.NewScheme()

// version is the operator's version: set at build time (-ldflags "-X main.version=v0.3.0"), else
// the module's version as go install records it.
var version = ""

func init() {
	if version != "" {
		return
	}
	version = "devel"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		version = info.Main.Version
	}
}

func init() {
	utilruntime.Must(operator.AddToScheme(scheme))
}

func main() {
	c := parseFlags()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&c.log)))
	if err := run(c); err != nil {
		ctrl.Log.WithName("setup").Error(err, "The manager stopped")
		os.Exit(1)
	}
}

// run runs the manager until it is asked to stop, and exports the last spans.
func run(c config) error {
	setupLog := ctrl.Log.WithName("setup")
	policy, err := egress.New(c.egressAllow, c.egressDeny)
	if err != nil {
		return fmt.Errorf("invalid egress policy: %w", err)
	}
	c.operator.Egress = policy
	restConfig := ctrl.GetConfigOrDie()
	if c.operator.Kueue, err = operator.KueueServed(restConfig); err != nil {
		return err
	}
	mgr, err := newManager(restConfig, c)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	stopTraces, err := telemetry.Setup(ctx, "baton-operator", version)
	if err != nil {
		return fmt.Errorf("setting up trace export: %w", err)
	}
	defer func() {
		// The spans of runs that ended last are exported before the process goes.
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTraces(flush); err != nil {
			setupLog.Error(err, "Exporting the last spans")
		}
	}()
	if telemetry.Enabled() {
		setupLog.Info("Exporting traces by OTLP", "content", c.operator.TraceContent)
	}
	if !c.operator.DisableControllers {
		store, err := sqlstore.Open(ctx, c.transcriptDSN)
		if err != nil {
			return fmt.Errorf("opening the transcript store: %w", err)
		}
		defer func() {
			if err := store.Close(); err != nil {
				setupLog.Error(err, "Closing the transcript store")
			}
		}()
		setupLog.Info("Transcript store open", "store", sqlstore.Redact(c.transcriptDSN))
		c.operator.Transcript = store
	}
	if err := operator.Setup(ctx, mgr, agents.Dependencies{}, clock.RealClock{}, c.operator); err != nil {
		return fmt.Errorf("setting up the controllers: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	setupLog.Info("Starting the manager")
	return mgr.Start(ctx)
}

// newManager is the controller-runtime manager the flags describe.
func newManager(restConfig *rest.Config, c config) (ctrl.Manager, error) {
	var tlsOpts []func(*tls.Config)
	if !c.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: c.metricsAddr, SecureServing: c.secureMetrics, TLSOpts: tlsOpts}
	if c.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  c.probeAddr,
		PprofBindAddress:        c.pprofAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        "agents.baton.dev",
		LeaderElectionNamespace: c.leaderElectionNS,
		Cache:                   operator.CacheOptions(c.operator.SecretNamespaces, c.operator.Kueue),
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:         c.webhookPort,
			CertDir:      c.webhookCertDir,
			ClientCAName: c.webhookClientCA,
			TLSOpts:      tlsOpts,
		}),
	})
}
