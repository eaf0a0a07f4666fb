package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/baton-dev/baton/internal/a2aserver"
	"github.com/baton-dev/baton/internal/operator"
	batonwebhook "github.com/baton-dev/baton/internal/webhook"
)

// config is what the manager's flags say.
type config struct {
	metricsAddr, probeAddr, pprofAddr string
	secureMetrics, leaderElect        bool
	enableHTTP2                       bool
	leaderElectionNS                  string
	webhookPort                       int
	webhookCertDir, webhookClientCA   string
	transcriptDSN                     string
	egressAllow, egressDeny           []string
	operator                          operator.Options
	log                               zap.Options
}

// parseFlags reads the manager's flags.
func parseFlags() config {
	var c config
	o := &c.operator
	flag.StringVar(&c.metricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	flag.BoolVar(&c.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, with authentication and authorization through the API server.")
	flag.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "The address the health and readiness probes bind to.")
	flag.StringVar(&c.pprofAddr, "pprof-bind-address", "",
		"The address Go's profiler (/debug/pprof/) listens on, without authentication, e.g. 127.0.0.1:6060; empty disables it.")
	flag.BoolVar(&c.leaderElect, "leader-elect", false,
		"Elect a leader, so that only one of several replicas reconciles at a time.")
	flag.StringVar(&c.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader election lease; defaults to the namespace the manager runs in.")
	flag.BoolVar(&c.enableHTTP2, "enable-http2", false,
		"Serve metrics over HTTP/2 as well; off by default because of HTTP/2 stream attacks.")
	runFlags(o)
	webhookFlags(&c)
	flag.StringVar(&c.transcriptDSN, "transcript-store", "/var/lib/baton/transcript.db",
		"Where runs' transcripts are kept: a file path (SQLite, embedded; one replica) or a postgres:// DSN "+
			"(PostgreSQL; more replicas, more runs). Leave the password out of the DSN and set PGPASSWORD, e.g. from a Secret.")
	flag.StringVar(&o.TranscriptAddr, "transcript-bind-address", ":8444",
		"The address the transcript API (HTTPS) listens on; 0 disables it. Whoever may get an AgentRun may read its transcript there.")
	flag.StringVar(&o.TranscriptCertDir, "transcript-cert-dir", "",
		"Directory with the transcript API's serving certificate (tls.crt, tls.key); defaults to --webhook-cert-dir, else a self-signed one.")
	flag.StringVar(&o.A2AURL, "a2a-url", "",
		"The transcript API's address as A2A clients reach it (https://host[:port]), which the AgentCards of teams with spec.a2a.expose name; empty, a card names the address its request came to.")
	flag.StringVar(&o.A2ATokenAudience, "a2a-token-audience", a2aserver.DefaultTokenAudience,
		"The audience A2A callers' bearer tokens must be made for (kubectl create token SERVICEACCOUNT --audience ...); tokens made for the API server are refused. Client certificates are accepted too.")
	flag.DurationVar(&o.A2AStreamLifetime, "a2a-stream-lifetime", a2aserver.DefaultStreamLifetime,
		"The longest an A2A stream, subscription or send that waits follows its task; the caller subscribes again to go on. Every such call also ends when its caller may no longer follow the task.")
	flag.StringVar(&o.ConsoleURL, "console-url", "",
		"The web console's address as people open it (kubectl baton ui's, or one served for a team), which notifications link gates to; empty, notifications carry no link.")
	flag.BoolVar(&o.TraceContent, "trace-content", false,
		"Put prompts, answers, tool arguments and tool results on trace spans. Off, spans carry names, token counts, timings and outcomes only. Traces are exported by OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.")
	flag.Func("egress-allow", "Addresses the calls a config makes (models, HTTP agents, HTTP and MCP tools) may reach although the egress policy refuses them: CIDRs, IP addresses and host names (*.domain for a whole domain), comma-separated; may be repeated. The policy refuses loopback, link-local and cloud metadata addresses, after DNS resolution, and redirects to another origin.",
		appendList(&c.egressAllow))
	flag.Func("egress-deny", "More addresses the calls a config makes may not reach, as CIDRs or IP addresses, comma-separated; may be repeated. Add the cluster's pod and service ranges so that no config reaches inside the cluster.",
		appendList(&c.egressDeny))
	flag.Func("secret-namespaces", "The only namespaces whose Secrets labelled agents.baton.dev/api-key=true the operator reads, comma-separated; may be repeated. Empty: every namespace (the ClusterRole lists Secrets cluster-wide).",
		appendList(&o.SecretNamespaces))
	flag.StringVar(&o.OperatorNamespace, "operator-namespace", "",
		"The namespace the operator runs in, where ClusterModelEndpoints' API key Secrets are; defaults to POD_NAMESPACE, else the ServiceAccount's namespace, else default. Its labelled Secrets are read whatever --secret-namespaces says.")
	c.log.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.OperatorNamespace == "" {
		o.OperatorNamespace = batonwebhook.OperatorNamespace()
	}
	if len(o.SecretNamespaces) > 0 && !slices.Contains(o.SecretNamespaces, o.OperatorNamespace) {
		o.SecretNamespaces = append(o.SecretNamespaces, o.OperatorNamespace)
	}
	if o.TranscriptCertDir == "" {
		o.TranscriptCertDir = c.webhookCertDir
	}
	return c
}

// runFlags are the flags of how runs are worked on.
func runFlags(o *operator.Options) {
	flag.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 8,
		"Reconcile workers of the AgentRun controller, and as many status writers. Agent steps do not hold a worker while they run, nor does a status write.")
	flag.IntVar(&o.MaxStepsInFlight, "max-steps-in-flight", operator.DefaultMaxStepsInFlight,
		"Agent steps that may run at once across all runs; further steps wait for a slot.")
	flag.DurationVar(&o.StatusBatchPeriod, "status-batch-period", operator.DefaultStatusBatchPeriod,
		"How long a run's status may wait to be written with the steps that end after it while the run goes on; 0 writes every step as it ends. The transcript has every step as it ends either way.")
	o.ReplayMaxReadBytes = operator.DefaultReplayMaxReadBytes
	flag.Var((*byteQuantity)(&o.ReplayMaxReadBytes), "replay-max-read-bytes",
		"The most `bytes` of transcripts one replay (a run with spec.replay) may read, its branch runs' included, as a quantity such as 4Gi; past it the run ends ReplayBudgetExceeded.")
	flag.IntVar(&o.MaxReplaysInFlight, "max-replays-in-flight", operator.DefaultMaxReplaysInFlight,
		"Replays (runs with spec.replay) that may run at once across all namespaces; further replays wait for a slot.")
	flag.IntVar(&o.MaxReplaysPerNamespace, "max-replays-per-namespace", operator.DefaultMaxReplaysPerNamespace,
		"Replays that may run at once in one namespace; further replays of the namespace wait for a slot.")
}

// byteQuantity is a flag's number of bytes, written as a Kubernetes quantity (4Gi, 512Mi).
type byteQuantity int64

func (b *byteQuantity) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteQuantity) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("%s: want a positive number of bytes", v)
	}
	*b = byteQuantity(q.Value())
	return nil
}

// webhookFlags are the admission webhook's flags.
func webhookFlags(c *config) {
	o := &c.operator
	flag.BoolVar(&o.EnableWebhooks, "enable-webhooks", os.Getenv("ENABLE_WEBHOOKS") != "false",
		"Serve the admission webhook that records who approves (default true; ENABLE_WEBHOOKS=false turns it off).")
	flag.IntVar(&c.webhookPort, "webhook-port", 9443, "The port the admission webhook listens on.")
	flag.StringVar(&c.webhookCertDir, "webhook-cert-dir", "",
		"Directory with the webhook's serving certificate (tls.crt, tls.key); defaults to controller-runtime's.")
	flag.StringVar(&c.webhookClientCA, "webhook-client-ca-name", "",
		"A CA bundle's file name in --webhook-cert-dir: the webhook then answers only clients whose certificate it signed (the API server's, as its admission configuration presents it). Empty: any client that reaches the port.")
	flag.BoolVar(&o.DisableControllers, "webhook-only", false,
		"Serve only the admission webhook, without the controllers.")
	flag.BoolVar(&o.TrustDecisionQueue, "trust-decision-queue", os.Getenv("ENABLE_WEBHOOKS") != "false",
		"Record who decided, and who created each run, as the admission webhook stamped them, while the webhook is seen installed (the operator dry-runs a run's creation every minute). Where it is not seen, or with false, decisions are recorded unverified and no run's creator is known.")
	flag.StringVar(&o.OperatorUser, "operator-user", "",
		"The Kubernetes user the controllers act as, e.g. system:serviceaccount:baton-system:baton-controller-manager: the admission webhook takes only that user's writes of the decision queue and of a run's creator as the operator's. Empty: the user this manager runs as. Set it on webhook-only replicas that run as a ServiceAccount of their own.")
	flag.StringVar(&o.WebhookProbeNamespace, "webhook-probe-namespace", "",
		"Where the operator dry-runs a run's creation to see the admission webhook installed; defaults to the namespace it runs in, else default.")
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
