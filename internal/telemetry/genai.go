package telemetry

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Baton's own attributes, beside the GenAI ones.
const (
	// RunNameKey is the AgentRun's name; gen_ai.conversation.id is its UID.
	RunNameKey = attribute.Key("baton.run.name")
	// StepKey is the step's number in its run.
	StepKey = attribute.Key("baton.step")
	// ReasonKey is why a run ended.
	ReasonKey = attribute.Key("baton.termination.reason")
	// ToolServerKey is a tool call's server.
	ToolServerKey = attribute.Key("baton.tool.server")
)

// ProviderName is gen_ai.provider.name for an agent's provider: "openai" for OpenAI and the
// servers that speak its API, Baton's own for the others.
func ProviderName(p v1alpha1.ModelProvider) string {
	switch p {
	case v1alpha1.ProviderOpenAI:
		return "openai"
	case v1alpha1.ProviderHTTP:
		return "baton.http_agent"
	case v1alpha1.ProviderA2A:
		return "baton.a2a_agent"
	default:
		return "baton.scripted"
	}
}

// Run is what a run's spans say about it.
type Run struct {
	UID, Name, Namespace, Config string
}

func (r Run) attributes() []attribute.KeyValue {
	return []attribute.KeyValue{semconv.GenAIConversationID(r.UID), RunNameKey.String(r.Name),
		semconv.K8SNamespaceName(r.Namespace), semconv.GenAIWorkflowName(r.Config)}
}

// WorkflowSpan are the start options of a run's invoke_workflow span.
func WorkflowSpan(r Run, opts ...trace.SpanStartOption) []trace.SpanStartOption {
	return append(opts, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(r.attributes(), semconv.GenAIOperationNameInvokeWorkflow)...))
}

// WorkflowName is the name of a run's span.
func WorkflowName(config string) string { return "invoke_workflow " + config }

// AgentSpan are the start options of a step's invoke_agent span. An HTTP or A2A agent is a
// remote agent: its span is a client span.
func AgentSpan(r Run, step int32, a *v1alpha1.Agent) []trace.SpanStartOption {
	kind := trace.SpanKindInternal
	if a.Model.Provider == v1alpha1.ProviderHTTP || a.Model.Provider == v1alpha1.ProviderA2A {
		kind = trace.SpanKindClient
	}
	attrs := append(r.attributes(), semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName(a.Name),
		semconv.GenAIProviderNameKey.String(ProviderName(a.Model.Provider)), StepKey.Int(int(step)))
	if a.Model.Name != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(a.Model.Name))
	}
	if a.Description != "" {
		attrs = append(attrs, semconv.GenAIAgentDescription(a.Description))
	}
	return []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(attrs...)}
}

// AgentName is the name of a step's span.
func AgentName(agent string) string { return "invoke_agent " + agent }

// ChatSpan are the start options of a model call's chat span.
func ChatSpan(r Run, a *v1alpha1.Agent) []trace.SpanStartOption {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(ProviderName(a.Model.Provider)),
		semconv.GenAIConversationID(r.UID), semconv.GenAIAgentName(a.Name)}
	if a.Model.Name != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(a.Model.Name))
	}
	if a.Model.MaxOutputTokens != nil {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(*a.Model.MaxOutputTokens)))
	}
	if a.Model.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*a.Model.Temperature))
	}
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...)}
}

// ChatName is the name of a model call's span.
func ChatName(a *v1alpha1.Agent) string {
	if a.Model.Name != "" {
		return "chat " + a.Model.Name
	}
	return "chat"
}

// ToolSpan are the start options of a tool call's execute_tool span.
func ToolSpan(server, tool, callID string) []trace.SpanStartOption {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool),
		semconv.GenAIToolType("extension"), ToolServerKey.String(server)}
	if callID != "" {
		attrs = append(attrs, semconv.GenAIToolCallID(callID))
	}
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
}

// ToolName is the name of a tool call's span.
func ToolName(tool string) string { return "execute_tool " + tool }

// Usage records a model's or a step's token usage; input is the part of total that was prompts.
func Usage(span trace.Span, total, input int64) {
	if total <= 0 {
		return
	}
	input = min(max(input, 0), total)
	span.SetAttributes(semconv.GenAIUsageInputTokens(int(input)), semconv.GenAIUsageOutputTokens(int(total-input)))
}

// Fail marks a span failed, with an error type and a message that never carries content.
func Fail(span trace.Span, errorType, message string) {
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
	span.SetStatus(codes.Error, message)
}

// Message is one message of gen_ai.input.messages or gen_ai.output.messages, as the GenAI
// conventions put it in JSON: a role and its parts.
type Message struct {
	Role  string `json:"role"`
	Parts []Part `json:"parts"`
}

// Part is a message's text, or one of its tool calls.
type Part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	Name      string          `json:"name,omitempty"`
	ID        string          `json:"id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Text is a message of one text part.
func Text(role, content string) Message {
	return Message{Role: role, Parts: []Part{{Type: "text", Content: content}}}
}

// Content records what a model or an agent was given and answered. Only with --trace-content:
// prompts and answers may hold anything the runs' inputs and tools held.
func Content(span trace.Span, input, output []Message) {
	if len(input) > 0 {
		data, _ := json.Marshal(input)
		span.SetAttributes(semconv.GenAIInputMessagesKey.String(string(data)))
	}
	if len(output) > 0 {
		data, _ := json.Marshal(output)
		span.SetAttributes(semconv.GenAIOutputMessagesKey.String(string(data)))
	}
}

// ToolContent records a tool call's arguments and result. Only with --trace-content.
func ToolContent(span trace.Span, arguments json.RawMessage, result string) {
	if len(arguments) > 0 {
		span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(string(arguments)))
	}
	if result != "" {
		span.SetAttributes(semconv.GenAIToolCallResultKey.String(result))
	}
}

// FinishReasons is gen_ai.response.finish_reasons: why the model stopped.
func FinishReasons(reasons ...string) attribute.KeyValue {
	return semconv.GenAIResponseFinishReasonsKey.StringSlice(reasons)
}
