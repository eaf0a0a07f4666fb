package live

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/agents"
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
	// runMade are the calls the replayed run made before the step, and uses those that passed
	// the guards, which the turn's calls add to.
	runMade int32
	uses    *workflow.ToolUses
	// asked numbers the step's calls, made counts those made; stopped is why a call stopped
	// the replay.
	asked, made int32
	stopped     *Stop
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
		t.asked++
		turn.Calls[i].Index = t.asked
	}
	return nil
}

// Prepare puts a call through the guards the operator's toolbox puts it through
// (workflow.GuardCall): refused as the operator would refuse it, a trip that ends the replayed
// run, or answered from the recording; a call nothing recorded stops the replay.
func (t *Tools) Prepare(_ context.Context, call workflow.ToolCall) (agents.Prepared, error) {
	use := workflow.UseOf(t.step, call)
	v := workflow.GuardCall(t.plan, t.agent, t.made, t.runMade+t.made, t.uses, use)
	switch {
	case v.Trip != nil:
		return agents.Prepared{}, v.Trip
	case v.Refusal != "":
		return agents.Prepared{Outcome: workflow.ToolOutcome{IsError: true, Content: v.Why}}, nil
	}
	for _, r := range t.results {
		if r.Call.Server != call.Server || r.Call.Tool != call.Tool || workflow.ArgumentsDigest(r.Call.Arguments) != use.Digest {
			continue
		}
		recorded := workflow.RecordedCall{Server: call.Server, Tool: call.Tool, Digest: use.Digest, ApprovedBy: r.ApprovedBy, Taint: r.Taint}
		if err := t.plan.CheckRecordedApprovals(t.step, t.agent, recorded); err != nil {
			return t.stop(fmt.Errorf("the live turn's call of %s/%s was recorded, but %w", call.Server, call.Tool, err))
		}
		t.made++
		return agents.Prepared{Outcome: r.Outcome}, nil
	}
	return t.stop(fmt.Errorf("the live turn calls %s/%s with arguments the recorded run never used: a replay calls no tool", call.Server, call.Tool))
}

func (t *Tools) stop(err error) (agents.Prepared, error) {
	t.stopped = &Stop{Err: err}
	return agents.Prepared{}, t.stopped
}
