package controllers

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/baton-dev/baton/internal/agents"
	"github.com/baton-dev/baton/internal/agents/providers"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/telemetry"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/internal/transcriptapi"
	batonwebhook "github.com/baton-dev/baton/internal/webhook"
)

// CacheOptions are the manager cache settings the controllers rely on: only the config
// snapshots the operator makes are cached, not every ControllerRevision in the cluster, and
// only the Secrets labelled for API keys, not every Secret; those only in secretNamespaces when
// it names any (Options.SecretNamespaces).
func CacheOptions(secretNamespaces []string) cache.Options {
	secrets := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelAPIKey: "true"})}
	if len(secretNamespaces) > 0 {
		secrets.Namespaces = make(map[string]cache.Config, len(secretNamespaces))
		for _, ns := range secretNamespaces {
			secrets.Namespaces[ns] = cache.Config{}
		}
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.ControllerRevision{}: {Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})},
			&corev1.Secret{}:             secrets,
		},
		// Nothing reads managedFields, so the cache does not keep them: less memory per run.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// Setup registers Baton's controllers and its admission webhook with the manager, as the
// options say. Controllers run on the elected leader only; the webhook is served by every
// replica, so that people can decide while the leader is away.
func Setup(ctx context.Context, mgr ctrl.Manager, deps agents.Dependencies, clk clock.Clock, opts Options) error {
	if deps.Secrets == nil && !opts.DisableControllers {
		// Start the labelled Secrets' informer with the manager, not at the first run's read.
		if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Secret{}); err != nil {
			return err
		}
		deps.Secrets = newSecretReader(mgr.GetClient(), opts.SecretNamespaces)
	}
	if deps.Clock == nil {
		deps.Clock = clk
	}
	if deps.HTTPClient == nil {
		// Every call a config makes goes out through the admin's egress policy.
		policy := opts.Egress
		if policy == nil {
			policy = egress.Default()
		}
		deps.HTTPClient = policy.Client()
	}
	deps.HTTPClient = telemetry.HTTPClient(deps.HTTPClient)
	known := providers.New(deps)
	if !opts.DisableControllers {
		if opts.Transcript == nil {
			return errors.New("the controllers need a transcript store")
		}
		if opts.Tools == nil {
			pool := tools.NewPool(tools.Options{HTTPClient: agents.RetryingClient(deps.HTTPClient, deps.Clock), Version: "v1alpha1"})
			opts.Tools = pool
			if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				<-ctx.Done()
				pool.Close()
				return nil
			})); err != nil {
				return err
			}
		}
		metrics.ApprovalsWaiting.Use(mgr.GetCache(), clk)
		runs := NewAgentRunReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(),
			mgr.GetEventRecorder("baton-controller"), clk, known, deps.Secrets, opts)
		if err := runs.SetupWithManager(mgr); err != nil {
			return err
		}
		every := opts.TranscriptSweep
		if every <= 0 {
			every = time.Minute
		}
		if err := mgr.Add(&transcriptSweep{reader: mgr.GetClient(), store: opts.Transcript, clock: clk,
			log: ctrl.Log.WithName("transcript-sweep"), every: every, grace: 2 * every}); err != nil {
			return err
		}
		if opts.TranscriptAddr != "" && opts.TranscriptAddr != "0" {
			if err := addTranscriptAPI(ctx, mgr, opts); err != nil {
				return err
			}
		}
		configs := &AgentConfigReconciler{Client: mgr.GetClient(), Providers: known}
		if err := configs.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if opts.EnableWebhooks {
		// A client of its own: the webhook must answer before the manager's cache has started.
		c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		hook, err := batonwebhook.NewDecisions(ctx, c, admission.NewDecoder(mgr.GetScheme()), clk)
		if err != nil {
			return err
		}
		mgr.GetWebhookServer().Register(batonwebhook.Path, &webhook.Admission{Handler: hook})
	}
	return nil
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
	return mgr.Add(&transcriptapi.Server{Addr: opts.TranscriptAddr, CertDir: opts.TranscriptCertDir,
		Handler: h.ServeMux(), Log: log, Listening: opts.TranscriptListening})
}
