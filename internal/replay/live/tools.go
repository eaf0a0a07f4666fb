package live

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/internal/agents"
	"github.com/baton-dev/baton/internal/replay"
	"github.com/baton-dev/baton/internal/workflow"
)

// Tools is a live turn's toolbox: it calls no tool. It offers the agent the tools the config
// lets it call that the recorded run called, and answers a call with the recorded result of the
// same tool with the same arguments; at a tool's gate, only if the recorded call's approvals
// pass the gate as the config now has it. A call nothing recorded stops the replay: a replay
// never reaches a real system.
type Tools struct {
	plan    *workflow.Plan
	agent   string
	step    int32
	results []replay.ToolResult
	// made counts the step's calls; stopped is why a call stopped the replay.
	made    int32
	stopped *Stop
}

var _ agents.Toolbox = (*Tools)(nil)

// Offered are the recorded run's tools that the agent may call, without their descriptions
// and schemas, which the recording does not hold.
func (t *Tools) Offered(context.Context) ([]agents.OfferedTool, error) {
	var out []agents.OfferedTool
	seen := map[string]bool{}
	for _, r := range t.results {
		key := r.Call.Server + "/" + r.Call.Tool
		if seen[key] || !t.plan.ToolAllowed(t.agent, r.Call.Server, r.Call.Tool) {
			continue
		}
		seen[key] = true
		out = append(out, agents.OfferedTool{Server: r.Call.Server, Tool: r.Call.Tool, Name: agents.FunctionName(r.Call.Server, r.Call.Tool)})
	}
	return out, nil
}

// Progress is nothing: a live turn starts afresh.
func (t *Tools) Progress() agents.Progress { return agents.Progress{} }

// Asked numbers the turn's calls.
func (t *Tools) Asked(_ context.Context, turn *agents.Turn) error {
	for i := range turn.Calls {
		t.made++
		turn.Calls[i].Index = t.made
	}
	return nil
}

// Prepare answers a call from the recording, refuses it as the operator would, or stops the
// replay.
func (t *Tools) Prepare(_ context.Context, call workflow.ToolCall) (agents.Prepared, error) {
	refuse := func(why string) (agents.Prepared, error) {
		return agents.Prepared{Outcome: workflow.ToolOutcome{IsError: true, Content: why}}, nil
	}
	limit := int32(agents.DefaultMaxToolCalls)
	if a := t.plan.Agent(t.agent); a != nil && a.MaxToolCalls != nil {
		limit = *a.MaxToolCalls
	}
	switch {
	case !t.plan.ToolAllowed(t.agent, call.Server, call.Tool):
		return refuse(fmt.Sprintf("not made: agent %s may not call %s/%s", t.agent, call.Server, call.Tool))
	case call.Index > limit:
		return refuse(fmt.Sprintf("not made: this step's limit of %d tool calls is reached; answer with what you have", limit))
	}
	digest := agents.ArgumentsDigest(call.Arguments)
	for _, r := range t.results {
		if r.Call.Server != call.Server || r.Call.Tool != call.Tool || agents.ArgumentsDigest(r.Call.Arguments) != digest {
			continue
		}
		recorded := workflow.RecordedCall{Server: call.Server, Tool: call.Tool, ApprovedBy: r.ApprovedBy}
		if err := t.plan.CheckRecordedCalls(t.step, t.agent, []workflow.RecordedCall{recorded}); err != nil {
			return t.stop(fmt.Errorf("the live turn's call of %s/%s was recorded, but: %w", call.Server, call.Tool, err))
		}
		return agents.Prepared{Outcome: r.Outcome}, nil
	}
	return t.stop(fmt.Errorf("the live turn calls %s/%s with arguments the recorded run never used: a replay calls no tool", call.Server, call.Tool))
}

func (t *Tools) stop(err error) (agents.Prepared, error) {
	t.stopped = &Stop{Err: err}
	return agents.Prepared{}, t.stopped
}
