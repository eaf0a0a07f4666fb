package steps

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/telemetry"
	"github.com/baton-dev/baton/internal/workflow"
)

// A step's span is made in its goroutine, a span per model call by chatCalls, a span per tool
// call by the toolbox; the run's own span by the status write that ends the run. Prompts,
// answers, tool arguments and results go on spans only with Config.TraceContent.

// startStep starts a step's invoke_agent span, a child of its run's span. A span that neither
// records nor has an identity of its own (no tracer provider is installed) is not kept: the step
// goes on in its run's trace context, which is all it would send on to model servers, agents
// and tools, and holds no span while it waits.
func startStep(ctx context.Context, run telemetry.Run, step int32, a *v1alpha1.Agent) (context.Context, trace.Span) {
	parent := telemetry.RunContext(ctx, run.UID)
	stepCtx, span := telemetry.Tracer().Start(parent, telemetry.AgentName(a.Name), telemetry.AgentSpan(run, step, a)...)
	if !span.IsRecording() && span.SpanContext().Equal(trace.SpanContextFromContext(parent)) {
		return parent, noSpan
	}
	return stepCtx, span
}

// noSpan is a span that records nothing and takes no memory.
var noSpan = trace.SpanFromContext(context.Background())

// endStep ends a step's span with what the step used and how it ended.
func endStep(span trace.Span, req *agents.Request, res *workflow.Result, failure string, timedOut, content bool) {
	telemetry.Usage(span, res.Tokens-res.CountedTokens, res.InputTokens-res.CountedInputTokens)
	switch {
	case timedOut:
		telemetry.Fail(span, "timeout", failure)
	case failure != "":
		telemetry.Fail(span, "error", failure)
	}
	if content {
		telemetry.Content(span, messagesOf(agents.Messages(*req)), []telemetry.Message{telemetry.Text("assistant", res.Output)})
	}
	span.End()
}

// chatCalls gives each model call of a step its chat span.
type chatCalls struct {
	run     telemetry.Run
	agent   *v1alpha1.Agent
	req     *agents.Request
	content bool
}

var _ agents.ModelCalls = chatCalls{}

func (c chatCalls) Call(ctx context.Context, exchanges []agents.Exchange) (context.Context, func(*agents.Reply, error), error) {
	ctx, span := telemetry.Tracer().Start(ctx, telemetry.ChatName(c.agent), telemetry.ChatSpan(c.run, c.agent)...)
	return ctx, func(reply *agents.Reply, err error) {
		telemetry.Usage(span, reply.Tokens, reply.InputTokens)
		if err != nil {
			kind := "error"
			if errors.Is(err, context.DeadlineExceeded) {
				kind = "timeout"
			}
			telemetry.Fail(span, kind, "the model call failed")
		}
		finish := string(reply.Final.FinishReason)
		if len(reply.Calls) > 0 {
			finish = "tool_calls"
		}
		if finish != "" && err == nil {
			span.SetAttributes(telemetry.FinishReasons(finish))
		}
		if c.content {
			input := messagesOf(agents.Messages(*c.req))
			for _, ex := range exchanges {
				input = append(input, turnMessage(ex.Turn))
				for i, o := range ex.Outcomes {
					if i < len(ex.Turn.Calls) {
						input = append(input, telemetry.Message{Role: "tool", Parts: []telemetry.Part{
							{Type: "tool_call_response", ID: ex.Turn.Calls[i].ID, Content: o.Content}}})
					}
				}
			}
			out := turnMessage(agents.Turn{Text: reply.Text, Calls: reply.Calls})
			if len(reply.Calls) == 0 {
				out = telemetry.Text("assistant", reply.Final.Output)
			}
			telemetry.Content(span, input, []telemetry.Message{out})
		}
		span.End()
	}, nil
}

func messagesOf(msgs []workflow.Message) []telemetry.Message {
	out := make([]telemetry.Message, len(msgs))
	for i, m := range msgs {
		out[i] = telemetry.Text(m.Role, m.Content)
	}
	return out
}

func turnMessage(t agents.Turn) telemetry.Message {
	m := telemetry.Message{Role: "assistant"}
	if t.Text != "" {
		m.Parts = append(m.Parts, telemetry.Part{Type: "text", Content: t.Text})
	}
	for _, c := range t.Calls {
		m.Parts = append(m.Parts, telemetry.Part{Type: "tool_call", ID: c.ID, Name: agents.FunctionName(c.Server, c.Tool), Arguments: c.Arguments})
	}
	return m
}

// tracedRun is what a run's spans say about it.
func tracedRun(r records.RunID, config string) telemetry.Run {
	return telemetry.Run{UID: r.UID, Name: r.Name, Namespace: r.Namespace, Config: config}
}
