package toolbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/shopspring/decimal"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// stepProgress reads what a step already did from its tool records: its turns with their calls'
// outcomes, and what gates it was held at counted.
func stepProgress(ctx context.Context, store transcript.Store, runUID string, step int32) (agents.Progress, []records.CallBody, int64, error) {
	recs, err := store.List(ctx, transcript.Query{RunUID: runUID, Step: &step,
		Kinds: []transcript.Kind{transcript.KindToolTurn, transcript.KindTool, transcript.KindToolGate, transcript.KindGuardGate}})
	if err != nil {
		return agents.Progress{}, nil, 0, fmt.Errorf("reading step %d's tool calls from the transcript: %w", step, err)
	}
	var size int64
	for _, rec := range recs {
		size += int64(len(rec.Body))
	}
	var p agents.Progress
	var turns []agents.Turn
	outcomes := map[int32]records.CallBody{}
	for _, rec := range recs {
		switch rec.Kind {
		case transcript.KindToolTurn:
			var b records.TurnBody
			if err := json.Unmarshal(rec.Body, &b); err != nil {
				return p, nil, 0, fmt.Errorf("reading step %d's turn %d from the transcript: %w", step, rec.Call, err)
			}
			turns = append(turns, agents.Turn{Number: rec.Call, Text: b.Text, Tokens: b.Tokens, InputTokens: b.InputTokens, Cost: b.Cost, Calls: b.Calls})
		case transcript.KindTool:
			var b records.CallBody
			if err := json.Unmarshal(rec.Body, &b); err != nil {
				return p, nil, 0, fmt.Errorf("reading step %d's call %d from the transcript: %w", step, rec.Call, err)
			}
			outcomes[rec.Call] = b
		case transcript.KindToolGate, transcript.KindGuardGate:
			var b records.HeldBody
			if err := json.Unmarshal(rec.Body, &b); err != nil {
				return p, nil, 0, fmt.Errorf("reading step %d's gate at call %d from the transcript: %w", step, rec.Call, err)
			}
			p.CountedTokens = max(p.CountedTokens, b.Tokens)
			p.CountedInputTokens = max(p.CountedInputTokens, b.InputTokens)
			p.CountedCalls = max(p.CountedCalls, b.ToolCalls)
			if cost.Amount(b.Cost).GreaterThan(cost.Amount(p.CountedCost)) {
				p.CountedCost = b.Cost
			}
		}
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i].Number < turns[j].Number })
	var done []records.CallBody
	turnCost := decimal.Zero
	for _, t := range turns {
		turnCost = turnCost.Add(cost.Amount(t.Cost))
	}
	if turnCost.IsPositive() {
		p.Cost = cost.Format(turnCost)
	}
	for _, t := range turns {
		ex := agents.Exchange{Turn: t}
		for _, c := range t.Calls {
			o, ok := outcomes[c.Index]
			if !ok {
				break
			}
			ex.Outcomes = append(ex.Outcomes, o.ToolOutcome)
			done = append(done, o)
		}
		p.Exchanges = append(p.Exchanges, ex)
	}
	return p, done, size, nil
}

// addToolUses adds to uses the tool calls the run's steps before step asked for, from their
// tool-turn records: what the repeated-call detector needs after the operator restarted.
func addToolUses(ctx context.Context, store transcript.Store, runUID string, step int32, uses *workflow.ToolUses) error {
	q := transcript.Query{RunUID: runUID, Kinds: []transcript.Kind{transcript.KindToolTurn}}
	err := records.Each(ctx, store, q, func(rec transcript.Record) (bool, error) {
		if rec.Step >= step {
			return false, nil
		}
		var b records.TurnBody
		if json.Unmarshal(rec.Body, &b) == nil {
			for _, c := range b.Calls {
				uses.Add(workflow.UseOf(rec.Step, c))
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("reading the run's tool calls from the transcript: %w", err)
	}
	return nil
}
