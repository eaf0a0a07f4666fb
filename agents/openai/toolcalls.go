package openai

import (
	"encoding/json"
	"strings"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// toolCall is one tool call of a model's answer, as any provider reports it.
type toolCall struct {
	name      string
	arguments string
}

// applyToolCalls turns a model's tool calls into the step's handoff, fan-out, signal or routing.
// A step that may fan out fans out when it calls fan_out or several transfer tools (see
// applyFanOut); otherwise the first call Baton knows wins. The calls not used are named in
// Result.Ignored.
func applyToolCalls(res *workflow.Result, req *agents.Request, calls []toolCall) error {
	if req.MaxBranches() > 0 {
		if fanned, err := applyFanOut(res, req, calls); fanned || err != nil {
			return err
		}
	}
	used := false
	for _, c := range calls {
		if used || !known(c.name) {
			res.Ignored = append(res.Ignored, c.name)
			continue
		}
		used = true
		var args struct {
			Reason     string   `json:"reason"`
			Signal     string   `json:"signal"`
			Target     string   `json:"target"`
			Confidence *float64 `json:"confidence"`
			Fallback   string   `json:"fallback"`
		}
		_ = json.Unmarshal([]byte(c.arguments), &args)
		switch {
		case strings.HasPrefix(c.name, toolTransferPrefix):
			res.Handoff = handoffTarget(req, strings.TrimPrefix(c.name, toolTransferPrefix))
			res.Reason = args.Reason
		case c.name == toolSignal:
			res.Signal = args.Signal
		case c.name == toolRoute:
			res.Routing = &v1alpha1.RoutingDecision{Target: args.Target, Confidence: args.Confidence, Reason: args.Reason, Fallback: args.Fallback}
		}
	}
	return nil
}

func known(name string) bool {
	return strings.HasPrefix(name, toolTransferPrefix) || name == toolSignal || name == toolRoute
}

// handoffTarget maps a tool's agent back to its name (tools write dashes as underscores).
func handoffTarget(req *agents.Request, tool string) string {
	for _, p := range req.Peers {
		if toolName(p.Name) == toolTransferPrefix+tool {
			return p.Name
		}
	}
	return tool
}
