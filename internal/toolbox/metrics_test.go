package toolbox

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// TestToolCallsAreCountedByTheNamesTheConfigDeclares checks that a tool server renaming its
// tools, or a model making names up, cannot grow the tool-calls metric: only the names the
// config declares are labels, every other is "(other)".
func TestToolCallsAreCountedByTheNamesTheConfigDeclares(t *testing.T) {
	cfg := MakeConfig("tools", "metrics-ns").MCPServer("memory", "http://memory.example/mcp").HTTPTool("crm", "http://crm.example").Agents(
		MakeAgent("a").Tools(Uses("memory").Allow("search"), Uses("crm")),
	).Obj()
	plan, errs := workflow.NewPlan(cfg.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	b := &Box{plan: plan, agent: "a", config: "tools", run: records.RunID{Namespace: "metrics-ns"},
		offered: map[string]bool{"memory/search": true, "crm/crm": true}}
	for i := range 50 {
		// A server that names its tools anew on every list.
		renamed := fmt.Sprintf("search_v%d", i)
		b.offered["memory/"+renamed] = true
		b.count(records.CallBody{ToolCall: agentsCall("memory", renamed), ToolOutcome: made()})
	}
	b.count(records.CallBody{ToolCall: agentsCall("memory", "search"), ToolOutcome: made()})
	b.count(records.CallBody{ToolCall: agentsCall("crm", "crm"), ToolOutcome: made()})
	b.count(records.CallBody{ToolCall: agentsCall("made-up", "x"), ToolOutcome: made()})

	want := map[[2]string]float64{{"memory", "(other)"}: 50, {"memory", "search"}: 1, {"crm", "crm"}: 1, {"(other)", "(other)"}: 1}
	for labels, n := range want {
		if got := testutil.ToFloat64(metrics.ToolCalls.WithLabelValues("metrics-ns", "tools", labels[0], labels[1], "ok")); got != n {
			t.Errorf("server %s tool %s: %v calls, want %v", labels[0], labels[1], got, n)
		}
	}
}

func agentsCall(server, tool string) workflow.ToolCall {
	return workflow.ToolCall{Server: server, Tool: tool}
}

func made() workflow.ToolOutcome { return workflow.ToolOutcome{Made: true} }
