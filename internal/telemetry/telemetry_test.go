package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestARunIsOneTrace checks that a run's trace ID is its UID and that the spans of its steps,
// started before the run's own span is, are that span's children.
func TestARunIsOneTrace(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder), sdktrace.WithIDGenerator(runIDs{})))
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

	const uid = "6f1d2c3b-4a59-4e8d-9c7b-0a1b2c3d4e5f"
	_, step := Tracer().Start(RunContext(context.Background(), uid), "invoke_agent a")
	step.End()
	_, other := Tracer().Start(RunContext(context.Background(), "7f1d2c3b-4a59-4e8d-9c7b-0a1b2c3d4e5f"), "invoke_agent b")
	other.End()
	_, run := StartRun(context.Background(), uid, "invoke_workflow team")
	run.End()

	spans := recorder.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	stepSpan, otherSpan, runSpan := spans[0], spans[1], spans[2]
	if got := runSpan.SpanContext().TraceID().String(); got != strings.ReplaceAll(uid, "-", "") {
		t.Fatalf("trace ID %s, want the run's UID", got)
	}
	if runSpan.Parent().IsValid() {
		t.Fatal("the run's span has a parent")
	}
	if stepSpan.SpanContext().TraceID() != runSpan.SpanContext().TraceID() || stepSpan.Parent().SpanID() != runSpan.SpanContext().SpanID() {
		t.Fatalf("the step's span is not a child of its run's: parent %s, run span %s", stepSpan.Parent().SpanID(), runSpan.SpanContext().SpanID())
	}
	if otherSpan.SpanContext().TraceID() == runSpan.SpanContext().TraceID() || otherSpan.Parent().SpanID() == runSpan.SpanContext().SpanID() {
		t.Fatal("another run's step is in this run's trace")
	}
	if stepSpan.SpanContext().SpanID() == runSpan.SpanContext().SpanID() {
		t.Fatal("the step's span has the run span's ID")
	}
}
