package toolbox

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/internal/telemetry"
	"github.com/baton-dev/baton/internal/workflow"
)

// StartSpan starts a tool call's execute_tool span, a child of its step's span.
func StartSpan(ctx context.Context, call workflow.ToolCall) (context.Context, trace.Span) {
	return telemetry.Tracer().Start(ctx, telemetry.ToolName(call.Tool), telemetry.ToolSpan(call.Server, call.Tool, call.ID)...)
}

// EndSpan ends a tool call's span.
func EndSpan(span trace.Span, call workflow.ToolCall, outcome workflow.ToolOutcome, content bool) {
	if outcome.IsError {
		telemetry.Fail(span, "tool_error", fmt.Sprintf("%s/%s answered with an error", call.Server, call.Tool))
	}
	if content {
		telemetry.ToolContent(span, call.Arguments, outcome.Content)
	}
	span.End()
}
