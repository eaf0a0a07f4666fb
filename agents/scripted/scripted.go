// Package scripted is the Scripted provider: an agent's script played back, deterministic and
// offline, for demos, benchmarks and fault injection.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// scripted plays an agent's script: deterministic turns for offline demos, benchmarks and
// fault injection. It keeps no state of its own: the turn to play follows from how many steps
// the agent already took in the run, so a restarted operator plays the same turns.
type scripted struct {
	clock clock.Clock
}

// New is the Scripted provider.
func New(deps agents.Dependencies) agents.Agent { return &scripted{clock: deps.Clock} }

// ErrNoTurn is returned when no turn of the script fits the step's input.
var ErrNoTurn = errors.New("no script turn matches the step's input")

func (s *scripted) Step(ctx context.Context, req *agents.Request) (*workflow.Result, error) {
	turn, err := pickTurn(req.Agent.Script, req.Turn, req.Input)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", req.Agent.Name, err)
	}
	// The turn's tool calls are asked for first, all at once, and made for real; then, after
	// the turn's delay, it answers (or fails). The turn's tokens go with its answer.
	return agents.Converse(ctx, req, func(ctx context.Context, exchanges []agents.Exchange, offered []agents.OfferedTool) (*agents.Reply, error) {
		if len(exchanges) == 0 && offered != nil && len(turn.ToolCalls) > 0 {
			return &agents.Reply{Calls: calls(turn)}, nil
		}
		if err := s.wait(ctx, turn.Delay.OrZero()); err != nil {
			return nil, err
		}
		return answer(turn)
	})
}

// calls are the tool calls a turn asks for.
func calls(turn *v1alpha1.ScriptTurn) []workflow.ToolCall {
	out := make([]workflow.ToolCall, len(turn.ToolCalls))
	for i, c := range turn.ToolCalls {
		out[i] = workflow.ToolCall{ID: fmt.Sprintf("call_%d", i+1), Server: c.Server, Tool: c.Tool, Arguments: arguments(c)}
	}
	return out
}

// answer is a turn's answer, or its error.
func answer(turn *v1alpha1.ScriptTurn) (*agents.Reply, error) {
	if turn.Error != "" {
		return nil, errors.New(turn.Error)
	}
	finish := turn.FinishReason
	if finish == "" {
		finish = v1alpha1.FinishStop
	}
	return &agents.Reply{Tokens: turn.Tokens, Final: workflow.Result{
		Output:       turn.Output,
		Handoff:      turn.Handoff,
		Reason:       turn.Reason,
		Signal:       turn.Signal,
		FinishReason: finish,
		Routing:      turn.Routing.DeepCopy(),
		Parallel:     branches(turn.Parallel),
	}}, nil
}

// branches are the turn's fan-out, as the core reads it.
func branches(requests []v1alpha1.BranchRequest) []workflow.Branch {
	if len(requests) == 0 {
		return nil
	}
	out := make([]workflow.Branch, len(requests))
	for i, r := range requests {
		out[i] = workflow.Branch{Agent: r.Agent, Input: r.Input}
	}
	return out
}

// wait is the turn's simulated latency.
func (s *scripted) wait(ctx context.Context, delay time.Duration) error {
	if delay > 0 {
		t := s.clock.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
	return ctx.Err()
}

// arguments are a scripted call's arguments, an empty object when it has none.
func arguments(c v1alpha1.ScriptToolCall) json.RawMessage {
	if c.Arguments == nil || len(c.Arguments.Raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(c.Arguments.Raw)
}

// pickTurn chooses the turn for an agent's turn-th step (from 0). Turns are consumed in order
// and the last one repeats: the agent starts at position min(turn, last) and takes the first
// turn from there whose when is empty or found in the input, wrapping around to the start.
// The turn is the script's own, read only.
func pickTurn(script []v1alpha1.ScriptTurn, turn int32, input string) (*v1alpha1.ScriptTurn, error) {
	if len(script) == 0 {
		return nil, errors.New("the agent has no script")
	}
	start := min(int(turn), len(script)-1)
	for i := range script {
		t := &script[(start+i)%len(script)]
		if t.When == "" || strings.Contains(input, t.When) {
			return t, nil
		}
	}
	return nil, ErrNoTurn
}
