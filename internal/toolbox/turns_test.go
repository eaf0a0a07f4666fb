package toolbox

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

// noClients is tool clients a test never calls.
type noClients struct{}

func (noClients) Client(context.Context, string, v1alpha1.ToolServer, map[string]string) (tools.Client, error) {
	panic("no tool server is called")
}

// A turn's toolbox counts, for the repeated-call detector, the calls of the session's earlier
// turns given the same history (the plan names them) with its own run's.
func TestATurnCountsTheCallsOfItsEarlierTurns(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	call := workflow.ToolCall{Server: "memory", Tool: "search", Arguments: json.RawMessage(`{"q":"ORD-7"}`)}
	body, _ := json.Marshal(records.TurnBody{Agent: "a", Calls: []workflow.ToolCall{call}})
	for _, uid := range []string{"uid-t1", "uid-other"} {
		rec := records.RunID{UID: uid, Namespace: "ns", Name: uid}.Record(transcript.Key{Kind: transcript.KindToolTurn, Step: 1}, time.Now(), body)
		if _, err := store.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	cfg := MakeConfig("tools", "ns").MCPServer("memory", "http://memory.example/mcp").Agents(MakeAgent("a").Tools(Uses("memory"))).Obj()
	plan, errs := workflow.NewPlan(cfg.Spec, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	m := &Maker{Clients: noClients{}, Store: store}
	for name, tc := range map[string]struct {
		plan *workflow.Plan
		want int32
	}{
		"a turn after one given the same history": {plan: plan.WithEarlierTurns(nil, []string{"uid-t1"}), want: 1},
		"a run that is no such turn":              {plan: plan, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := m.New(ctx, tc.plan, records.RunID{UID: "uid-t2", Namespace: "ns", Name: "t2"}, "tools",
				workflow.Step{Number: 1, Agent: "a"}, &v1alpha1.AgentRunStatus{})
			if err != nil {
				t.Fatal(err)
			}
			if got := b.uses.Count(workflow.UseOf(1, call)); got != tc.want {
				t.Errorf("counted %d calls of memory/search with these arguments, want %d", got, tc.want)
			}
		})
	}
}
