// Package operator puts Baton's parts together in a controller-runtime manager, as the
// manager's flags say: the AgentRun and AgentConfig controllers with the step runner and the
// tool clients they use, the transcript API, the admission webhook, and the clients every call
// of a config goes out through.
package operator

import (
	"time"

	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/toolbox"
	"github.com/baton-dev/baton/internal/transcript"
)

// DefaultMaxStepsInFlight is the manager's --max-steps-in-flight default.
const DefaultMaxStepsInFlight = 1024

// DefaultStatusBatchPeriod is the manager's --status-batch-period default: a run whose steps
// end quickly one after another is written about once a second, not once a step.
const DefaultStatusBatchPeriod = time.Second

// Defaults of the replays of runs with spec.replay (docs/design/replay.md): a replay reads each
// step's record twice, so the budget lets a replay of a 2 GiB transcript end; a replay holds
// what it compares, not the transcript, so a few at once take little memory.
const (
	// DefaultReplayMaxReadBytes is the manager's --replay-max-read-bytes default.
	DefaultReplayMaxReadBytes = 4 << 30
	// DefaultMaxReplaysInFlight is the manager's --max-replays-in-flight default, and
	// DefaultMaxReplaysPerNamespace its --max-replays-per-namespace default.
	DefaultMaxReplaysInFlight     = 4
	DefaultMaxReplaysPerNamespace = 2
)

// Options are what the manager's flags set: which parts run, and how.
type Options struct {
	// MaxConcurrentReconciles is the number of reconcile workers.
	MaxConcurrentReconciles int
	// MaxStepsInFlight bounds the agent steps running at once across all runs.
	MaxStepsInFlight int
	// StatusBatchPeriod is how long a run's status may wait to be written with the steps
	// that end after it, while the run goes on (0: every step is written when it ends). Every
	// step is in the transcript as it ends either way.
	StatusBatchPeriod time.Duration
	// ReplayMaxReadBytes is the most bytes of transcripts one replay (spec.replay) reads,
	// its branch runs' included; past it the run ends ReplayBudgetExceeded.
	ReplayMaxReadBytes int64
	// MaxReplaysInFlight and MaxReplaysPerNamespace bound the replays running at once, in all
	// and per namespace; the others wait for a slot.
	MaxReplaysInFlight, MaxReplaysPerNamespace int
	// EnableWebhooks serves the decisions admission webhook.
	EnableWebhooks bool
	// DisableControllers leaves out the controllers, to serve only the webhook.
	DisableControllers bool
	// TrustDecisionQueue takes the decision queue's "by" as who decided, and the created-by
	// annotation as who created the run, while the admission webhook is seen installed (it
	// alone writes both then; webhook.Trust). Without it anyone who may patch a run could write them,
	// so every decision is recorded as unverified and no run's creator is known.
	TrustDecisionQueue bool
	// OperatorUser is the Kubernetes user the controllers act as, whose writes alone the
	// admission webhook takes as the operator's (the decision queue, a run's creator): set on
	// webhook-only replicas that run as a ServiceAccount of their own ("": the user this
	// manager runs as).
	OperatorUser string
	// WebhookProbeNamespace is where the operator dry-runs a run's creation to see the webhook
	// installed ("": the namespace it runs in, else default).
	WebhookProbeNamespace string
	// Transcript is the store of runs' records. The controllers need it; the webhook does not.
	Transcript transcript.Store
	// TranscriptSweep is how often the transcripts of deleted runs are looked for and deleted
	// (default a minute).
	TranscriptSweep time.Duration
	// TranscriptAddr is where the transcript API listens ("" or "0": it is not served), over
	// HTTPS with the certificate in TranscriptCertDir (self-signed when empty).
	TranscriptAddr    string
	TranscriptCertDir string
	// TranscriptListening, when set, is told the address the transcript API listens on.
	TranscriptListening func(addr string)
	// TranscriptReauthorize is how often a transcript stream checks again that its caller may
	// read the run (default transcriptapi.DefaultReauthorize).
	TranscriptReauthorize time.Duration
	// A2AURL is the transcript API's address as A2A clients reach it (https://host[:port]):
	// the AgentCards of teams served as A2A agents name it. Empty, a card names the address
	// its request came to.
	A2AURL string
	// A2ATokenAudience is the only audience the bearer tokens of A2A callers are accepted for
	// ("": a2aserver.DefaultTokenAudience).
	A2ATokenAudience string
	// A2AStreamLifetime is the longest an A2A stream, subscription or send that waits follows
	// its task (default a2aserver.DefaultStreamLifetime).
	A2AStreamLifetime time.Duration
	// A2AReauthorize is how often such a call checks again that its caller may follow the
	// task (default a2aserver.DefaultReauthorize).
	A2AReauthorize time.Duration
	// Tools hands out the clients of tool servers (Setup makes a tools.Pool when nil).
	Tools toolbox.Clients
	// TraceContent puts prompts, answers, tool arguments and results on the traces' spans.
	// Off, spans carry names, counts, timings and outcomes only.
	TraceContent bool
	// ConsoleURL is the web console's address (--console-url): notifications link gates to it.
	ConsoleURL string
	// Egress is the policy every call a config makes goes through: models, HTTP agents, tools
	// (nil: egress.Default(), which refuses loopback, link-local and metadata addresses).
	Egress *egress.Policy
	// SecretNamespaces, when it names any, are the only namespaces whose labelled Secrets the
	// operator reads (and caches); Setup's caller passes the same list to CacheOptions. The
	// operator's namespace, where ClusterModelEndpoints' keys are, is always among them.
	SecretNamespaces []string
	// Kueue says the cluster serves Kueue's Workloads (KueueServed): runs labelled with a
	// LocalQueue wait for Kueue to admit them. The manager's cache must then be made with
	// CacheOptions(..., true).
	Kueue bool
	// OperatorNamespace is where the operator runs, and where ClusterModelEndpoints' Secrets
	// are ("": webhook.OperatorNamespace()).
	OperatorNamespace string
}
