// Package telemetry sets up Baton's OpenTelemetry traces and says how they are shaped: one trace
// per run, following the GenAI semantic conventions (semconv v1.41): an invoke_workflow span for
// the run, an invoke_agent span per step, a chat span per model call and an execute_tool span
// per tool call. Traces are exported by OTLP when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and are off otherwise.
package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of Baton's spans.
const TracerName = "github.com/baton-dev/baton"

// Tracer is Baton's tracer, from the global provider Setup installs (a no-op one until then).
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// Enabled reports whether the environment asks for traces: an OTLP endpoint is set.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Setup installs the W3C trace context propagator and, when Enabled, a tracer provider that
// exports by OTLP: over HTTP (protobuf) unless OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL says grpc. The exporters read the other standard OTEL_* variables
// (headers, certificates, timeout) themselves. The function returned flushes the spans not yet
// exported and stops.
func Setup(ctx context.Context, service, version string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch protocol := firstSet("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); protocol {
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: Baton exports traces over grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil {
		// A schema conflict between the default resource and ours: keep ours.
		res = resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.ServiceVersion(version))
	}
	if os.Getenv("OTEL_SERVICE_NAME") != "" {
		// The standard variable names the service, as it does for every other program.
		res, _ = resource.Merge(res, resource.Environment())
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(runIDs{}),
	)
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}

func firstSet(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return strings.ToLower(v)
		}
	}
	return ""
}

// A run's trace has the run's UID as its ID, and the run's span an ID derived from it, so that
// every step's span, made in whatever operator process takes the step, has the run's span as
// its parent before that span itself is recorded (when the run ends).

// runTrace is a run's trace ID and its span's ID.
func runTrace(uid string) (trace.TraceID, trace.SpanID, bool) {
	id, err := uuid.Parse(uid)
	if err != nil {
		return trace.TraceID{}, trace.SpanID{}, false
	}
	sum := sha256.Sum256([]byte("baton run span/" + uid))
	var span trace.SpanID
	copy(span[:], sum[:8])
	return trace.TraceID(id), span, true
}

// RunContext is ctx with the run's span as the parent of the spans started from it.
func RunContext(ctx context.Context, uid string) context.Context {
	tid, sid, ok := runTrace(uid)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
}

// fixedIDs carries the IDs the next root span must have.
type fixedIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

type fixedIDsKey struct{}

// StartRun starts the run's own span, with the IDs its steps' spans already point to. It is
// started once the run ended, with the run's start time.
func StartRun(ctx context.Context, uid, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if tid, sid, ok := runTrace(uid); ok {
		ctx = context.WithValue(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), fixedIDsKey{}, fixedIDs{trace: tid, span: sid})
		opts = append(opts, trace.WithNewRoot())
	}
	return Tracer().Start(ctx, name, opts...)
}

// runIDs makes random IDs, but for a run's span, whose IDs come from the run (StartRun).
type runIDs struct{}

func (runIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(fixedIDsKey{}).(fixedIDs); ok {
		return f.trace, f.span
	}
	var tid trace.TraceID
	_, _ = rand.Read(tid[:])
	return tid, newSpanID()
}

func (runIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return sid
}

// HTTPClient is c with its calls traced and the trace context passed on: the W3C traceparent
// header goes to model servers, HTTP agents and tools, so their own traces join the run's.
func HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	traced := *c
	traced.Transport = otelhttp.NewTransport(c.Transport)
	return &traced
}
