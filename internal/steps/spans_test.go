package steps

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/toolbox"
	"github.com/baton-dev/baton/internal/workflow"
)

// TestSpansCarryContentOnlyWhenAsked checks that prompts, answers, tool arguments and results go
// on spans with --trace-content, and that without it spans carry none of them.
func TestSpansCarryContentOnlyWhenAsked(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(provider)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

	agent := &v1alpha1.Agent{Name: "triage", Model: v1alpha1.ModelSpec{Provider: v1alpha1.ProviderOpenAI, Name: "gpt-4o-mini"}}
	req := &agents.Request{Agent: *agent, Task: "the password is hunter2", Input: "look it up"}
	call := workflow.ToolCall{Index: 1, ID: "call-1", Server: "crm", Tool: "lookup", Arguments: json.RawMessage(`{"email":"a@example.com"}`)}
	for _, content := range []bool{false, true} {
		recorder.Reset()
		run := tracedRun(records.RunID{}, "desk")
		ctx, step := startStep(context.Background(), run, 1, agent)
		_, done, _ := chatCalls{run: run, agent: agent, req: req, content: content}.Call(ctx, nil)
		done(&agents.Reply{Text: "", Calls: []workflow.ToolCall{call}, Tokens: 30, InputTokens: 20}, nil)
		_, tool := toolbox.StartSpan(ctx, call)
		toolbox.EndSpan(tool, call, workflow.ToolOutcome{Made: true, Content: "customer 1042, plan gold"}, content)
		endStep(step, req, &workflow.Result{Output: "the plan is gold", Tokens: 30, InputTokens: 20}, "", false, content)

		spans := recorder.Ended()
		if len(spans) != 3 {
			t.Fatalf("content %t: %d spans, want chat, execute_tool and invoke_agent", content, len(spans))
		}
		contentKeys := map[string]bool{"gen_ai.input.messages": true, "gen_ai.output.messages": true,
			"gen_ai.tool.call.arguments": true, "gen_ai.tool.call.result": true}
		found := map[string]bool{}
		for _, s := range spans {
			for _, kv := range s.Attributes() {
				if contentKeys[string(kv.Key)] {
					found[s.Name()+" "+string(kv.Key)] = true
				}
			}
		}
		want := map[string]bool{}
		if content {
			want = map[string]bool{
				"chat gpt-4o-mini gen_ai.input.messages": true, "chat gpt-4o-mini gen_ai.output.messages": true,
				"execute_tool lookup gen_ai.tool.call.arguments": true, "execute_tool lookup gen_ai.tool.call.result": true,
				"invoke_agent triage gen_ai.input.messages": true, "invoke_agent triage gen_ai.output.messages": true,
			}
		}
		if len(found) != len(want) {
			t.Fatalf("content %t: content attributes %v, want %v", content, found, want)
		}
		for k := range want {
			if !found[k] {
				t.Fatalf("content %t: no %s (found %v)", content, k, found)
			}
		}
	}
}
