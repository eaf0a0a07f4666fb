package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics have bounded labels: never a run's name.
var (
	runsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_agentruns_ended_total",
		Help: "AgentRuns that reached a terminal phase, by termination reason.",
	}, []string{"reason"})

	stepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_agent_steps_total",
		Help: "Agent steps taken, by provider and result (ok, error, timeout).",
	}, []string{"provider", "result"})

	stepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baton_agent_step_duration_seconds",
		Help:    "Duration of agent steps.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})

	stepsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "baton_agent_steps_in_flight",
		Help: "Agent steps started and not yet ended.",
	})

	transcriptWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "baton_transcript_write_seconds",
		Help:    "Duration of writes to the transcript store.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})

	transcriptWriteErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baton_transcript_write_errors_total",
		Help: "Writes to the transcript store that failed and were retried.",
	})

	stepsFromTranscript = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baton_steps_applied_from_transcript_total",
		Help: "Steps that had ended before the operator restarted, applied from their transcript record without calling the agent again.",
	})

	apiWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_api_writes_total",
		Help: "Writes this operator made to the API server, by kind (status, event, revision).",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(runsEnded, stepsTotal, stepDuration, stepsInFlight, apiWrites,
		transcriptWrite, transcriptWriteErrors, stepsFromTranscript)
}
