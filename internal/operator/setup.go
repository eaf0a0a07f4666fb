package operator

import (
	"cmp"
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/controllers/agentconfig"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/controllers/agentrun"
	"github.com/baton-dev/baton/controllers/agentsession"
	"github.com/baton-dev/baton/controllers/modelendpoint"
	"github.com/baton-dev/baton/internal/a2aserver"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/notifier"
	"github.com/baton-dev/baton/internal/outbox"
	"github.com/baton-dev/baton/internal/pacing"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/secrets"
	"github.com/baton-dev/baton/internal/steps"
	"github.com/baton-dev/baton/internal/telemetry"
	"github.com/baton-dev/baton/internal/toolbox"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/internal/transcriptapi"
	batonwebhook "github.com/baton-dev/baton/internal/webhook"
)

// Setup registers Baton's controllers and its admission webhook with the manager, as the
// options say. Controllers run on the elected leader only; the webhook is served by every
// replica, so that people can decide while the leader is away.
func Setup(ctx context.Context, mgr ctrl.Manager, deps agents.Dependencies, clk clock.Clock, opts Options) error {
	if !opts.DisableControllers {
		if err := setupControllers(ctx, mgr, deps, clk, opts); err != nil {
			return err
		}
	}
	if opts.EnableWebhooks {
		return setupWebhook(ctx, mgr, clk, opts)
	}
	return nil
}

// setupWebhook serves the decisions admission webhook.
func setupWebhook(ctx context.Context, mgr ctrl.Manager, clk clock.Clock, opts Options) error {
	// A client of its own: the webhook must answer before the manager's cache has started.
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	hook, err := batonwebhook.NewDecisions(ctx, c, admission.NewDecoder(mgr.GetScheme()), clk)
	if err != nil {
		return err
	}
	if opts.OperatorUser != "" {
		// Replicas that serve only the webhook run as a user of their own, not as the
		// controllers, whose writes the webhook must tell from people's.
		hook.Self = opts.OperatorUser
	}
	mgr.GetWebhookServer().Register(batonwebhook.Path, &webhook.Admission{Handler: hook})
	return nil
}

// setupControllers registers the controllers, the step runner and the tool clients they use,
// the sweep of deleted runs' transcripts and the transcript API.
func setupControllers(ctx context.Context, mgr ctrl.Manager, deps agents.Dependencies, clk clock.Clock, opts Options) error {
	if opts.Transcript == nil {
		return errors.New("the controllers need a transcript store")
	}
	keys, err := withDependencies(ctx, mgr, &deps, clk, opts)
	if err != nil {
		return err
	}
	known := providers.New(deps)
	if opts.Tools == nil {
		if opts.Tools, err = toolClients(mgr, deps); err != nil {
			return err
		}
	}
	// Guardrails are called through the egress policy, with retries as tool calls have.
	guards := &guardrails.Client{HTTP: agents.RetryingClient(deps.HTTPClient, deps.Clock), Headers: keys.SecretData}
	toolboxes := &toolbox.Maker{Clients: opts.Tools, Headers: keys.SecretData, Store: opts.Transcript, Content: opts.TraceContent,
		Guardrails: guards}
	var trust *batonwebhook.Trust
	if opts.TrustDecisionQueue {
		trust = batonwebhook.NewTrust(mgr.GetClient(), opts.WebhookProbeNamespace, clk, ctrl.Log.WithName("webhook-trust"))
	}
	metrics.ApprovalsWaiting.Use(mgr.GetCache(), clk)
	if opts.OperatorNamespace == "" {
		opts.OperatorNamespace = batonwebhook.OperatorNamespace()
	}
	resolver := &endpoints.Resolver{Reader: mgr.GetClient(), OperatorNamespace: opts.OperatorNamespace}
	pacer := pacing.New(clk)
	spend := ledger.New(opts.Transcript)
	if opts.Kueue {
		ctrl.Log.WithName("setup").Info("Kueue's Workloads are served: runs labelled with a LocalQueue wait for Kueue's admission")
	}
	runs := agentrun.New(agentrun.Config{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("baton-controller"), Clock: clk, Providers: known, Secrets: deps.Secrets,
		Transcript: opts.Transcript, Ledger: spend, Trust: trust, MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		StatusBatchPeriod: opts.StatusBatchPeriod, Forget: toolboxes.Forget, Kueue: opts.Kueue, Replays: replayConfig(opts),
		Steps: steps.New(steps.Config{Store: opts.Transcript, Providers: known, Toolboxes: toolboxes, Guardrails: guards, Clock: clk,
			TraceContent: opts.TraceContent, Log: ctrl.Log.WithName("steps"), MaxInFlight: opts.MaxStepsInFlight,
			Endpoints: resolver, Pacer: pacer, Ledger: spend,
			Quotas: func(ctx context.Context, namespace string) (*quota.Caps, error) {
				return agentquota.Caps(ctx, mgr.GetClient(), namespace)
			}})})
	if err := runs.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(agentrun.NewSweep(mgr.GetClient(), opts.Transcript, clk, ctrl.Log.WithName("transcript-sweep"), opts.TranscriptSweep)); err != nil {
		return err
	}
	if opts.TranscriptAddr != "" && opts.TranscriptAddr != "0" {
		if err := addTranscriptAPI(ctx, mgr, opts); err != nil {
			return err
		}
	}
	uses := &modelendpoint.Reconciler{Client: mgr.GetClient(), Pacer: pacer, Endpoints: resolver}
	if err := uses.SetupWithManager(mgr); err != nil {
		return err
	}
	quotas := &agentquota.Reconciler{Client: mgr.GetClient(), Clock: clk,
		Usage: &agentquota.Usage{Reader: mgr.GetClient(), Ledger: spend, Bytes: opts.Transcript}}
	if err := quotas.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := addNotifier(mgr, deps, keys, clk, opts); err != nil {
		return err
	}
	talks := &agentsession.Reconciler{Client: mgr.GetClient(), Clock: clk, Recorder: mgr.GetEventRecorder("baton-controller")}
	if err := talks.SetupWithManager(mgr); err != nil {
		return err
	}
	configs := &agentconfig.Reconciler{Client: mgr.GetClient(), Providers: known}
	return configs.SetupWithManager(mgr)
}

// replayConfig is how the replays of runs with spec.replay are bounded: the options' bounds,
// or their defaults where the options leave them out.
func replayConfig(opts Options) agentrun.ReplayConfig {
	c := agentrun.ReplayConfig{MaxReadBytes: opts.ReplayMaxReadBytes, InFlight: opts.MaxReplaysInFlight, PerNamespace: opts.MaxReplaysPerNamespace}
	if c.MaxReadBytes <= 0 {
		c.MaxReadBytes = DefaultReplayMaxReadBytes
	}
	if c.InFlight <= 0 {
		c.InFlight = DefaultMaxReplaysInFlight
	}
	if c.PerNamespace <= 0 {
		c.PerNamespace = DefaultMaxReplaysPerNamespace
	}
	return c
}

// withDependencies fills in what the providers use that the caller left out: the Secrets, the
// clock, and the HTTP client every call of a config goes out with, through the admin's egress
// policy and traced. It returns what reads the labelled Secrets.
func withDependencies(ctx context.Context, mgr ctrl.Manager, deps *agents.Dependencies, clk clock.Clock, opts Options) (*secrets.Reader, error) {
	// Start the labelled Secrets' informer with the manager, not at the first run's read.
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Secret{}); err != nil {
		return nil, err
	}
	reader := secrets.NewReader(mgr.GetClient(), opts.SecretNamespaces)
	if deps.Secrets == nil {
		deps.Secrets = reader
	}
	if deps.Clock == nil {
		deps.Clock = clk
	}
	if deps.HTTPClient == nil {
		policy := opts.Egress
		if policy == nil {
			policy = egress.Default()
		}
		deps.HTTPClient = policy.Client()
	}
	deps.HTTPClient = telemetry.HTTPClient(deps.HTTPClient)
	return reader, nil
}

// toolClients is the pool of tool servers' clients, closed when the manager stops.
func toolClients(mgr ctrl.Manager, deps agents.Dependencies) (toolbox.Clients, error) {
	pool := tools.NewPool(tools.Options{HTTPClient: agents.RetryingClient(deps.HTTPClient, deps.Clock), Version: "v1alpha1"})
	return pool, mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		pool.Close()
		return nil
	}))
}

// addTranscriptAPI serves runs' transcripts to the people who may read the runs.
func addTranscriptAPI(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	kube, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("transcript-api")
	auth, err := transcriptapi.NewAuth(ctx, kube, log)
	if err != nil {
		return err
	}
	h := &transcriptapi.Handler{Store: opts.Transcript, Runs: mgr.GetClient(), Auth: auth, Reauthorize: opts.TranscriptReauthorize}
	mux := h.ServeMux()
	// Teams served as A2A agents, beside the transcripts, to callers whose tokens were made for
	// Baton: a token another service was given is no key to the teams.
	audience := cmp.Or(opts.A2ATokenAudience, a2aserver.DefaultTokenAudience)
	teams := &a2aserver.Handler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Auth: auth.ForAudiences(audience), Audience: audience, URL: opts.A2AURL,
		StreamLifetime: opts.A2AStreamLifetime, Reauthorize: opts.A2AReauthorize}
	teams.Register(mux)
	return mgr.Add(&transcriptapi.Server{Addr: opts.TranscriptAddr, CertDir: opts.TranscriptCertDir,
		Handler: mux, Log: log, Listening: opts.TranscriptListening})
}

// addNotifier sends runs' notifications to their configs' sinks, through the egress policy,
// from the outbox the transcript store keeps.
func addNotifier(mgr ctrl.Manager, deps agents.Dependencies, reader *secrets.Reader, clk clock.Clock, opts Options) error {
	box, ok := opts.Transcript.(outbox.Store)
	if !ok {
		ctrl.Log.WithName("setup").Info("The transcript store keeps no outbox: notifications are not sent")
		return nil
	}
	return mgr.Add(&notifier.Notifier{Client: mgr.GetClient(), Cache: mgr.GetCache(), Outbox: box, Transcript: opts.Transcript,
		Secrets: reader, HTTP: deps.HTTPClient, Console: opts.ConsoleURL, Clock: clk, Log: ctrl.Log.WithName("notifier")})
}
