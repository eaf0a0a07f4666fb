package agentrun

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/telemetry"
)

// Traces of a run (telemetry says their shape): the step's span is made in its goroutine, a
// span per model call by chatCalls, a span per tool call by the toolbox, and the run's own span
// by the status write that ends the run. Prompts, answers, tool arguments and results go on
// spans only with Options.TraceContent.

// runOf is what a run's spans say about it.
func runOf(id *v1alpha1.AgentRun, config string) telemetry.Run {
	return telemetry.Run{UID: string(id.UID), Name: id.Name, Namespace: id.Namespace, Config: config}
}

// traceRun records a run's own span, once it ended: from its start to its end, with why it
// ended. Its steps' spans, recorded as they ended, are its children.
func traceRun(run *v1alpha1.AgentRun) {
	s := &run.Status
	if s.StartTime == nil || s.CompletionTime == nil {
		return
	}
	info := runOf(run, run.Spec.ConfigRef.Name)
	_, span := telemetry.StartRun(context.Background(), info.UID, telemetry.WorkflowName(info.Config),
		telemetry.WorkflowSpan(info, trace.WithTimestamp(s.StartTime.Time))...)
	span.SetAttributes(telemetry.ReasonKey.String(string(s.TerminationReason)))
	if s.Phase != v1alpha1.PhaseSucceeded {
		telemetry.Fail(span, string(s.TerminationReason), s.TerminationMessage)
	}
	span.End(trace.WithTimestamp(s.CompletionTime.Time))
}
