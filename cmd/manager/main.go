// Command manager runs the Baton operator: the AgentRun controller that advances multi-agent
// runs one agent step at a time.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/agents"
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
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

func main() {
	var (
		metricsAddr      string
		secureMetrics    bool
		probeAddr        string
		leaderElect      bool
		enableHTTP2      bool
		controllerOpts   operator.Options
		leaderElectionNS string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, with authentication and authorization through the API server.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the health and readiness probes bind to.")
	var pprofAddr string
	flag.StringVar(&pprofAddr, "pprof-bind-address", "",
		"The address Go's profiler (/debug/pprof/) listens on, without authentication, e.g. 127.0.0.1:6060; empty disables it.")
	flag.BoolVar(&leaderElect, "leader-elect", false,
		"Elect a leader, so that only one of several replicas reconciles at a time.")
	flag.StringVar(&leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader election lease; defaults to the namespace the manager runs in.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false,
		"Serve metrics over HTTP/2 as well; off by default because of HTTP/2 stream attacks.")
	flag.IntVar(&controllerOpts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8,
		"Reconcile workers of the AgentRun controller. Agent steps do not hold a worker while they run.")
	flag.IntVar(&controllerOpts.MaxStepsInFlight, "max-steps-in-flight", operator.DefaultMaxStepsInFlight,
		"Agent steps that may run at once across all runs; further steps wait for a slot.")
	flag.DurationVar(&controllerOpts.StatusBatchPeriod, "status-batch-period", operator.DefaultStatusBatchPeriod,
		"How long a run's status may wait to be written with the steps that end after it while the run goes on; 0 writes every step as it ends. The transcript has every step as it ends either way.")
	var webhookPort int
	var webhookCertDir string
	var transcriptDSN string
	flag.StringVar(&controllerOpts.TranscriptAddr, "transcript-bind-address", ":8444",
		"The address the transcript API (HTTPS) listens on; 0 disables it. Whoever may get an AgentRun may read its transcript there.")
	flag.StringVar(&controllerOpts.TranscriptCertDir, "transcript-cert-dir", "",
		"Directory with the transcript API's serving certificate (tls.crt, tls.key); defaults to --webhook-cert-dir, else a self-signed one.")
	flag.StringVar(&transcriptDSN, "transcript-store", "/var/lib/baton/transcript.db",
		"Where runs' transcripts are kept: a file path (SQLite, embedded; one replica) or a postgres:// DSN "+
			"(PostgreSQL; more replicas, more runs). Leave the password out of the DSN and set PGPASSWORD, e.g. from a Secret.")
	flag.BoolVar(&controllerOpts.EnableWebhooks, "enable-webhooks", os.Getenv("ENABLE_WEBHOOKS") != "false",
		"Serve the admission webhook that records who approves (default true; ENABLE_WEBHOOKS=false turns it off).")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "The port the admission webhook listens on.")
	flag.StringVar(&webhookCertDir, "webhook-cert-dir", "",
		"Directory with the webhook's serving certificate (tls.crt, tls.key); defaults to controller-runtime's.")
	flag.BoolVar(&controllerOpts.DisableControllers, "webhook-only", false,
		"Serve only the admission webhook, without the controllers.")
	flag.BoolVar(&controllerOpts.TrustDecisionQueue, "trust-decision-queue", os.Getenv("ENABLE_WEBHOOKS") != "false",
		"Record who decided, and who created each run, as the admission webhook stamped them, while the webhook is seen installed (the operator dry-runs a run's creation every minute). Where it is not seen, or with false, decisions are recorded unverified and no run's creator is known.")
	flag.StringVar(&controllerOpts.WebhookProbeNamespace, "webhook-probe-namespace", "",
		"Where the operator dry-runs a run's creation to see the admission webhook installed; defaults to the namespace it runs in, else default.")
	flag.BoolVar(&controllerOpts.TraceContent, "trace-content", false,
		"Put prompts, answers, tool arguments and tool results on trace spans. Off, spans carry names, token counts, timings and outcomes only. Traces are exported by OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.")
	var egressAllow, egressDeny []string
	flag.Func("egress-allow", "Addresses the calls a config makes (models, HTTP agents, HTTP and MCP tools) may reach although the egress policy refuses them: CIDRs, IP addresses and host names (*.domain for a whole domain), comma-separated; may be repeated. The policy refuses loopback, link-local and cloud metadata addresses, after DNS resolution, and redirects to another origin.",
		appendList(&egressAllow))
	flag.Func("egress-deny", "More addresses the calls a config makes may not reach, as CIDRs or IP addresses, comma-separated; may be repeated. Add the cluster's pod and service ranges so that no config reaches inside the cluster.",
		appendList(&egressDeny))
	flag.Func("secret-namespaces", "The only namespaces whose Secrets labelled agents.baton.dev/api-key=true the operator reads, comma-separated; may be repeated. Empty: every namespace (the ClusterRole lists Secrets cluster-wide).",
		appendList(&controllerOpts.SecretNamespaces))
	var webhookClientCA string
	flag.StringVar(&webhookClientCA, "webhook-client-ca-name", "",
		"A CA bundle's file name in --webhook-cert-dir: the webhook then answers only clients whose certificate it signed (the API server's, as its admission configuration presents it). Empty: any client that reaches the port.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")
	policy, err := egress.New(egressAllow, egressDeny)
	if err != nil {
		setupLog.Error(err, "Invalid egress policy")
		os.Exit(1)
	}
	controllerOpts.Egress = policy

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "agents.baton.dev",
		LeaderElectionNamespace: leaderElectionNS,
		Cache:                   operator.CacheOptions(controllerOpts.SecretNamespaces),
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:         webhookPort,
			CertDir:      webhookCertDir,
			ClientCAName: webhookClientCA,
			TLSOpts:      tlsOpts,
		}),
	})
	if err != nil {
		setupLog.Error(err, "Unable to create the manager")
		os.Exit(1)
	}

	ctx := ctrl.SetupSignalHandler()
	stopTraces, err := telemetry.Setup(ctx, "baton-operator", version)
	if err != nil {
		setupLog.Error(err, "Unable to set up trace export")
		os.Exit(1)
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
		setupLog.Info("Exporting traces by OTLP", "content", controllerOpts.TraceContent)
	}
	if controllerOpts.TranscriptCertDir == "" {
		controllerOpts.TranscriptCertDir = webhookCertDir
	}
	if !controllerOpts.DisableControllers {
		store, err := sqlstore.Open(ctx, transcriptDSN)
		if err != nil {
			setupLog.Error(err, "Unable to open the transcript store")
			os.Exit(1)
		}
		defer store.Close()
		setupLog.Info("Transcript store open", "store", sqlstore.Redact(transcriptDSN))
		controllerOpts.Transcript = store
	}
	if err := operator.Setup(ctx, mgr, agents.Dependencies{}, clock.RealClock{}, controllerOpts); err != nil {
		setupLog.Error(err, "Unable to set up the controllers")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "Unable to set up the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		setupLog.Error(err, "Unable to set up the readiness check")
		os.Exit(1)
	}

	setupLog.Info("Starting the manager")
	if err := mgr.Start(ctx); err != nil {
		setupLog.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
}

// appendList is a flag's setter that appends the comma-separated items of each value.
func appendList(list *[]string) func(string) error {
	return func(v string) error {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*list = append(*list, item)
			}
		}
		return nil
	}
}
