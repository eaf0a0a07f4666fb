package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// Parallel branches (docs/design/parallel-branches.md). An agent with parallel may end its step
// with several branches at once. The model asks for them with the fan_out tool, or by calling
// more than one transfer tool in one answer; either becomes Result.Parallel, which the core
// checks against the agent's handoffs, its parallel.maxBranches and the run's limits.

// toolFanOut is the tool an agent that may fan out is offered.
const toolFanOut = "fan_out"

// maxFallbackInput bounds what a branch without an input of its own is given: the branch run's
// spec.input, which holds at most this many bytes.
const maxFallbackInput = 32768

// fanOutTool is the fan_out tool of a step that may fan out: from one to the agent's
// parallel.maxBranches branches, each one of its handoffs and what that agent is given.
func fanOutTool(req *agents.Request) (openai.ChatCompletionToolUnionParam, bool) {
	n := req.MaxBranches()
	if n == 0 {
		return openai.ChatCompletionToolUnionParam{}, false
	}
	names := make([]string, len(req.Peers))
	for i, p := range req.Peers {
		names[i] = p.Name
	}
	branch := map[string]any{"type": "object", "required": []string{"agent", "input"}, "properties": map[string]any{
		"agent": map[string]any{"type": "string", "enum": names},
		"input": map[string]any{"type": "string", "description": "What the branch's agent is given to work on"},
	}}
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: toolFanOut,
		Description: openai.String(fmt.Sprintf("Hand the work to several agents at once, up to %d branches that work in parallel; "+
			"their outputs are joined once they end.", n)),
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"branches"}, "properties": map[string]any{
			"branches": map[string]any{"type": "array", "minItems": 1, "maxItems": n, "items": branch},
		}},
	}), true
}

// applyFanOut reads the fan-out of an answer of a step that may fan out: its first fan_out call,
// else its transfer calls when it made more than one, each a branch in the order called, its
// reason the branch's input. The answer's other calls are named in Result.Ignored. A branch with
// no input is given the answer's text, else the step's own input. It reports whether the answer
// fans out; a fan_out call whose arguments cannot be read fails the step.
func applyFanOut(res *workflow.Result, req *agents.Request, calls []toolCall) (bool, error) {
	var branches []workflow.Branch
	switch at := slices.IndexFunc(calls, func(c toolCall) bool { return c.name == toolFanOut }); {
	case at >= 0:
		read, err := fanOutBranches(req, calls[at].arguments)
		if err != nil {
			return true, err
		}
		branches = read
		for i, c := range calls {
			if i != at {
				res.Ignored = append(res.Ignored, c.name)
			}
		}
	case transfers(calls) > 1:
		branches = transferBranches(res, req, calls)
	default:
		return false, nil
	}
	fallback := textbound.Status(firstNonEmpty(res.Output, req.Input), maxFallbackInput)
	for i := range branches {
		if strings.TrimSpace(branches[i].Input) == "" {
			branches[i].Input = fallback
		}
	}
	res.Parallel = branches
	return true, nil
}

// transferBranches are an answer's transfer calls as branches, in the order called, each with
// its reason as the branch's input; the answer's other calls are named in Result.Ignored.
func transferBranches(res *workflow.Result, req *agents.Request, calls []toolCall) []workflow.Branch {
	var out []workflow.Branch
	for _, c := range calls {
		if !isTransfer(c) {
			res.Ignored = append(res.Ignored, c.name)
			continue
		}
		var args struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal([]byte(c.arguments), &args)
		out = append(out, workflow.Branch{Agent: handoffTarget(req, strings.TrimPrefix(c.name, toolTransferPrefix)), Input: args.Reason})
	}
	return out
}

// fanOutBranches reads a fan_out call's branches. An agent named as its transfer tool writes it
// (with underscores) is taken for that handoff; any other name is passed on for the core to
// refuse.
func fanOutBranches(req *agents.Request, arguments string) ([]workflow.Branch, error) {
	var args struct {
		Branches []workflow.Branch `json:"branches"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return nil, fmt.Errorf(`%w: agent %s called %s with arguments that are not {"branches": [{"agent": ..., "input": ...}]}: %w`,
			agents.ErrInvalidAnswer, req.Agent.Name, toolFanOut, err)
	}
	if len(args.Branches) == 0 {
		return nil, fmt.Errorf("%w: agent %s called %s with no branches", agents.ErrInvalidAnswer, req.Agent.Name, toolFanOut)
	}
	for i := range args.Branches {
		args.Branches[i].Agent = branchAgent(req, args.Branches[i].Agent)
	}
	return args.Branches, nil
}

// branchAgent is the handoff a fan_out branch names: the agent itself, or the one whose
// transfer tool's name it is (with underscores for dashes). Any other name is kept as it is.
func branchAgent(req *agents.Request, name string) string {
	for _, p := range req.Peers {
		if p.Name == name || toolName(p.Name) == toolName(name) {
			return p.Name
		}
	}
	return name
}

func isTransfer(c toolCall) bool { return strings.HasPrefix(c.name, toolTransferPrefix) }

// transfers counts an answer's transfer calls.
func transfers(calls []toolCall) int {
	n := 0
	for _, c := range calls {
		if isTransfer(c) {
			n++
		}
	}
	return n
}

func firstNonEmpty(texts ...string) string {
	for _, t := range texts {
		if strings.TrimSpace(t) != "" {
			return t
		}
	}
	return ""
}
