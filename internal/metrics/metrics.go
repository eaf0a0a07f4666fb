// Package metrics holds Baton's Prometheus metrics, registered on controller-runtime's registry
// and served on the manager's /metrics: their families, their bounded labels, and what counts
// into them from a status write or a step.
package metrics

import (
	"regexp"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

// Metrics have bounded labels: namespace, config, agent, model, provider, reason, guard,
// server, tool, gate and result take the values of the objects people made and of Baton's own
// enums, never a run's name or UID, and never a name a model or a tool server made up: a tool
// the config does not name is "(other)".
var (
	RunsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_agentruns_ended_total",
		Help: "AgentRuns that reached a terminal phase, by termination reason.",
	}, []string{"namespace", "config", "reason"})

	RunDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_agentrun_duration_seconds",
		Help:    "Wall time of AgentRuns from start to end, time waiting for people included, by termination reason.",
		Buckets: prometheus.ExponentialBuckets(1, 2.5, 14), // 1s to about 10 days
	}, []string{"namespace", "config", "reason"})

	StepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_agent_steps_total",
		Help: "Agent steps taken, by agent, provider and result (ok, error, timeout).",
	}, []string{"namespace", "config", "agent", "provider", "result"})

	StepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_agent_step_duration_seconds",
		Help:    "Duration of agent steps, model and tool calls included, by provider.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"provider"})

	TokensTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_agent_tokens_total",
		Help: "Tokens the agents' models reported, by type: input (prompts) and output (the rest; all of it for providers that report only a total).",
	}, []string{"namespace", "config", "agent", "model", "type"})

	GuardTrips = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_guard_trips_total",
		Help: "Runs a guard ended, by guard: the limit's termination reason, or the loop detector.",
	}, []string{"namespace", "config", "guard"})

	ToolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_tool_calls_total",
		Help: "Tool calls, by server, tool and result: ok, error (the tool or its server failed), refused (not made).",
	}, []string{"namespace", "config", "server", "tool", "result"})

	ApprovalWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_approval_wait_seconds",
		Help:    "Time runs waited at a gate before it was approved, rejected, timed out or the run ended, by gate.",
		Buckets: prometheus.ExponentialBuckets(1, 3, 13), // 1s to about 6 days
	}, []string{"namespace", "config", "gate"})

	StepsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "baton_agent_steps_in_flight",
		Help: "Agent steps started and not yet ended, those waiting for a slot included.",
	})

	TranscriptWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baton_transcript_write_seconds",
		Help:    "Duration of writes to the transcript store.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})

	TranscriptWriteErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baton_transcript_write_errors_total",
		Help: "Writes to the transcript store that failed and were retried.",
	})

	StepsFromTranscript = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baton_steps_applied_from_transcript_total",
		Help: "Steps that had ended before the operator restarted, applied from their transcript record without calling the agent again.",
	})

	CostTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_agent_cost_total",
		Help: "What the agents' model calls cost, from their endpoints' prices, in currency (the status keeps the exact decimal; this is for dashboards).",
	}, []string{"namespace", "config", "agent", "model", "currency"})

	StepsRateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baton_agent_steps_rate_limited_total",
		Help: "Steps whose first model call the server turned away (429): each went back into its endpoint's line, with no error.",
	})

	Notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_notifications_total",
		Help: "Deliveries of notifications to the sinks of configs' spec.notify, by result: sent, retry (failed, to be tried again) or given-up.",
	}, []string{"namespace", "config", "sink", "event", "result"})

	NotificationDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baton_notification_delay_seconds",
		Help:    "From an event (a gate opening, a run ending) to its sink taking it.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600},
	})

	GuardrailChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_guardrail_checks_total",
		Help: "Guardrail checks, by guardrail, stage and what they came to: allow, redact, block (a failure counts as its failure policy makes it).",
	}, []string{"namespace", "config", "guardrail", "stage", "action"})

	GuardrailLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_guardrail_latency_seconds",
		Help:    "How long a guardrail took to answer a check, its retries included.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"namespace", "guardrail", "stage"})

	APIWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_api_writes_total",
		Help: "Writes this operator made to the API server, by kind (status, event, revision, intake, config-status).",
	}, []string{"kind"})
)

// collectors are Baton's metrics, registered on controller-runtime's registry (served on
// /metrics beside controller-runtime's own).
var collectors = []prometheus.Collector{RunsEnded, RunDuration, StepsTotal, StepDuration, TokensTotal, GuardTrips, ToolCalls,
	ApprovalWait, StepsInFlight, APIWrites, TranscriptWrite, TranscriptWriteErrors, StepsFromTranscript, ApprovalsWaiting,
	CostTotal, StepsRateLimited, Notifications, NotificationDelay, GuardrailChecks, GuardrailLatency}

func init() { crmetrics.Registry.MustRegister(collectors...) }

// MetricNames are the names of the metric families Baton serves, sorted: what dashboards,
// alerts and docs may name.
func MetricNames() []string {
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range collectors {
			c.Describe(descs)
		}
		close(descs)
	}()
	var names []string
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}

// fqName reads a family's name from its description (prometheus.Desc has no getter).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Other stands for a name that is not the config's own: a tool a model made up, or one a
// tool server lists that no allow list names.
const Other = "(other)"

// ModelLabel names an agent's model: its model name, or its provider's when it has none.
func ModelLabel(a *v1alpha1.Agent) string {
	if a.Model.Name != "" {
		return a.Model.Name
	}
	return string(a.Model.Provider)
}

// CountTokens counts what a step adds to its run's tokens, as the status counts it: its usage,
// less what was counted while it was held at gates.
func CountTokens(namespace, config string, a *v1alpha1.Agent, res workflow.Result) {
	total := max(res.Tokens-res.CountedTokens, 0)
	input := min(max(res.InputTokens-res.CountedInputTokens, 0), total)
	if total == 0 {
		return
	}
	model := ModelLabel(a)
	TokensTotal.WithLabelValues(namespace, config, a.Name, model, "input").Add(float64(input))
	TokensTotal.WithLabelValues(namespace, config, a.Name, model, "output").Add(float64(total - input))
	countCost(namespace, config, a.Name, model, res)
}

// countCost counts what a step adds to its run's cost, less what was counted while it was held.
func countCost(namespace, config, agent, model string, res workflow.Result) {
	if res.Cost == "" || res.Currency == "" {
		return
	}
	added := cost.Amount(res.Cost).Sub(cost.Amount(res.CountedCost))
	if f := added.InexactFloat64(); f > 0 {
		CostTotal.WithLabelValues(namespace, config, agent, model, res.Currency).Add(f)
	}
}

// CountWrite counts what a status write says happened: a run that ended (its reason, its time,
// the guard that ended it, if one did) and a gate that is no longer waiting.
func CountWrite(run *v1alpha1.AgentRun, before v1alpha1.AgentRunStatus, guard string, now time.Time) {
	ns, config, after := run.Namespace, run.Spec.ConfigRef.Name, &run.Status
	if was := before.PendingApproval; was != nil {
		if is := after.PendingApproval; is == nil || is.Gate != was.Gate || !is.Since.Equal(&was.Since) {
			ApprovalWait.WithLabelValues(ns, config, was.Gate).Observe(max(now.Sub(was.Since.Time), 0).Seconds())
		}
	}
	if before.Phase.Terminal() || !after.Phase.Terminal() {
		return
	}
	reason := string(after.TerminationReason)
	RunsEnded.WithLabelValues(ns, config, reason).Inc()
	if after.StartTime != nil && after.CompletionTime != nil {
		RunDuration.WithLabelValues(ns, config, reason).Observe(max(after.CompletionTime.Sub(after.StartTime.Time), 0).Seconds())
	}
	if guard != "" {
		GuardTrips.WithLabelValues(ns, config, guard).Inc()
	}
}
