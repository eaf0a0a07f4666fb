package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The guards before each tool call an agent asks for, as decisions: the operator's toolbox, a
// replay's live turns and the replay of recorded calls (spec.from, spec.replay, kubectl baton
// replay) all ask GuardCall, so that no path makes a call the others would refuse.

// DefaultAgentToolCalls is an agent's tool calls per step when its spec says nothing.
const DefaultAgentToolCalls int32 = 10

// MaxToolArgumentsBytes is the most a call's arguments may take; larger ones are kept as a
// string, and the call is refused.
const MaxToolArgumentsBytes = 64 << 10

// Refusal is why a call the agent asked for was not made, as the guards before it decided.
type Refusal string

// Refusals.
const (
	// RefusalNotAllowed: the agent may not call the tool.
	RefusalNotAllowed Refusal = "NotAllowed"
	// RefusalArguments: the arguments are not a JSON object within MaxToolArgumentsBytes.
	RefusalArguments Refusal = "Arguments"
	// RefusalStepLimit: the agent made as many calls in the step as it may.
	RefusalStepLimit Refusal = "StepLimit"
	// RefusalRejected: a person rejected the call at its gate.
	RefusalRejected Refusal = "Rejected"
	// RefusalTainted: a tainted call of a tool with side effects, under onSideEffect Refuse.
	RefusalTainted Refusal = "Tainted"
)

// What the agent is told of a refused call begins with these words, by which records written
// before the refusal's kind was kept are read (RefusalOf).
const (
	notAllowedWords = "not made: agent "
	argumentsWords  = "not made: the arguments "
	stepLimitWords  = "not made: this step's limit "
	rejectedWords   = "rejected by "
)

// RejectedWhy is what the agent is told of a call a person rejected at its gate.
func RejectedWhy(by, feedback string) string {
	if feedback != "" {
		return rejectedWords + by + ": " + feedback
	}
	return rejectedWords + by
}

// RefusalOf is the kind of refusal an agent was told why of, as GuardCall and RejectedWhy
// word them; "" for words of neither.
func RefusalOf(why string) Refusal {
	for prefix, r := range map[string]Refusal{notAllowedWords: RefusalNotAllowed, argumentsWords: RefusalArguments,
		stepLimitWords: RefusalStepLimit, rejectedWords: RefusalRejected, TaintedWhy: RefusalTainted} {
		if strings.HasPrefix(why, prefix) {
			return r
		}
	}
	return ""
}

// CallVerdict is what the guards decide of a call: made (the zero verdict), refused (the agent
// is told Why, and goes on), or a Trip that ends the run before the call.
type CallVerdict struct {
	Refusal Refusal
	Why     string
	Trip    *ToolTrip
}

// StepToolCalls is the most tool calls the agent may make in one step.
func (p *Plan) StepToolCalls(agent string) int32 {
	if a := p.Agent(agent); a != nil && a.MaxToolCalls != nil {
		return *a.MaxToolCalls
	}
	return DefaultAgentToolCalls
}

// GuardCall is the guard before a call the agent asks for, before its gate: the agent's
// permission, the arguments' form and the step's limit refuse it; then the run's limit and the
// repeated-call detector (CheckToolCall) end the run. stepMade and runMade are the calls made
// before it in the step and in the run. A call that is refused or passes is counted in uses; one
// that trips is not.
func GuardCall(p *Plan, agent string, stepMade, runMade int32, uses *ToolUses, use ToolUse) CallVerdict {
	var v CallVerdict
	switch limit := p.StepToolCalls(agent); {
	case !p.ToolAllowed(agent, use.Server, use.Tool):
		v = CallVerdict{Refusal: RefusalNotAllowed, Why: fmt.Sprintf("%s%s may not call %s/%s", notAllowedWords, agent, use.Server, use.Tool)}
	case use.Malformed:
		v = CallVerdict{Refusal: RefusalArguments, Why: fmt.Sprintf("%smust be a JSON object of at most %d bytes", argumentsWords, MaxToolArgumentsBytes)}
	case stepMade >= limit:
		v = CallVerdict{Refusal: RefusalStepLimit, Why: fmt.Sprintf("%sof %d tool calls is reached; answer with what you have", stepLimitWords, limit)}
	default:
		if trip, stop := CheckToolCall(p, runMade, uses, use); stop {
			return CallVerdict{Trip: &ToolTrip{Reason: trip.Reason, Message: trip.Message, Loop: trip.Loop, Call: &use}}
		}
	}
	uses.Add(use)
	return v
}

// ArgumentsDigest is a short digest of a call's arguments, the same for the same JSON value
// however its keys are ordered or spaced: the repeated-call detector counts calls by it.
func ArgumentsDigest(args json.RawMessage) string {
	var v any
	canonical := []byte(strings.TrimSpace(string(args)))
	if json.Unmarshal(args, &v) == nil {
		canonical, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:8])
}

// MalformedArguments reports whether arguments are refused for their form: not a JSON object.
func MalformedArguments(args json.RawMessage) bool { return len(args) > 0 && args[0] != '{' }

// UseOf is a call as the guards see it.
func UseOf(step int32, c ToolCall) ToolUse {
	return ToolUse{Server: c.Server, Tool: c.Tool, Digest: ArgumentsDigest(c.Arguments), Step: step, Malformed: MalformedArguments(c.Arguments)}
}

// GuardRecordedTrip puts the call a guard stopped a recorded step at through the guards again,
// after the step's recorded calls (calls, what GuardRecordedCalls made of them): the trip the
// plan stops it with, or why the recording cannot say what the step would have done (the plan
// would have refused the call, or made it). A trip that names no call (the cost budget's, or a
// record written before trips named their call) is the recorded one.
func (p *Plan) GuardRecordedTrip(agent string, runMade int32, uses *ToolUses, calls RecordedCalls, trip *ToolTrip) (*ToolTrip, error) {
	if trip.Call == nil {
		return trip, nil
	}
	c := *trip.Call
	v := GuardCall(p, agent, calls.ToolCalls, runMade+calls.ToolCalls, uses, c)
	switch {
	case v.Trip != nil:
		return v.Trip, nil
	case v.Refusal != "":
		return nil, fmt.Errorf("step %d's call of %s/%s ended the run (%s), and under the current config it is refused (%s)",
			c.Step, c.Server, c.Tool, trip.Reason, strings.TrimPrefix(v.Why, "not made: "))
	}
	return nil, fmt.Errorf("step %d's call of %s/%s ended the run (%s), and under the current config it would be made: the recording holds no result of it",
		c.Step, c.Server, c.Tool, trip.Reason)
}

// RecordedCalls is what a recorded step's tool calls come to under a plan (GuardRecordedCalls).
type RecordedCalls struct {
	// Trip is the guard that would have ended the run before call At (its place in the step's
	// calls); Tokens and InputTokens are what the step used until then, ToolCalls the calls it
	// made.
	Trip                *ToolTrip
	At                  int
	Tokens, InputTokens int64
	ToolCalls           int32
	// Gates are the tool gates the step's calls passed, in order.
	Gates []string
}

// GuardRecordedCalls puts step n's recorded calls through the guards again, on the plan, in
// order, as the toolbox would have when the agent asked for them. runMade is the run's calls
// made before the step, and uses the calls that passed the guards before, which it adds to. A
// guard that ends the run is the result's Trip. The error says why the recording cannot say what
// the step would have done under the plan: a call the plan refuses that was made, or one it
// would make that was refused (the agent would have been told otherwise), or a call made without
// the approvals its gate now needs.
func (p *Plan) GuardRecordedCalls(n int32, agent string, runMade int32, uses *ToolUses, calls []RecordedCall) (RecordedCalls, error) {
	var out RecordedCalls
	for i, c := range calls {
		call := fmt.Sprintf("step %d's call %d, of %s/%s,", n, i+1, c.Server, c.Tool)
		v := GuardCall(p, agent, out.ToolCalls, runMade+out.ToolCalls, uses, ToolUse{Server: c.Server, Tool: c.Tool, Digest: c.Digest, Step: n, Malformed: c.Malformed})
		if v.Trip != nil {
			out.Trip, out.At, out.Tokens, out.InputTokens = v.Trip, i, c.Tokens, c.InputTokens
			return out, nil
		}
		g, gated := p.CallGate(agent, c.Server, c.Tool, c.Taint != "")
		switch {
		case v.Refusal != "" && c.Refused:
			continue
		case v.Refusal == "" && c.Refusal == RefusalTainted && p.RefusesTainted(agent, c.Server, c.Taint != ""):
			continue
		case v.Refusal != "":
			return out, fmt.Errorf("%s was made, and under the current config it is refused (%s)", call, strings.TrimPrefix(v.Why, "not made: "))
		case c.Refusal == RefusalRejected && !gated:
			return out, fmt.Errorf("%s was rejected at its gate, and under the current config it needs no approval: the recording holds no result of it", call)
		case c.Refusal == RefusalRejected:
			out.Gates = append(out.Gates, g.Name)
			continue
		case c.Refused && c.Refusal != "":
			return out, fmt.Errorf("%s was refused (%s), and under the current config it would be made: the recording holds no result of it", call, c.Refusal)
		case c.Refused:
			// A refusal whose reason the record does not say: it was not made either way.
			continue
		}
		if gated {
			if err := p.CheckRecordedApprovals(n, agent, c); err != nil {
				return out, err
			}
			out.Gates = append(out.Gates, g.Name)
		}
		out.ToolCalls++
	}
	return out, nil
}

// CheckRecordedApprovals says why a recorded call made at step n was made without the
// approvals its tool's gate now needs, if it was: fewer people than the gate requires, and no
// timeout that now approves.
func (p *Plan) CheckRecordedApprovals(n int32, agent string, c RecordedCall) error {
	g, gated := p.CallGate(agent, c.Server, c.Tool, c.Taint != "")
	if !gated {
		return nil
	}
	people := slices.DeleteFunc(slices.Clone(c.ApprovedBy), func(by string) bool { return by == v1alpha1.ByTimeout })
	byTimeout := len(people) < len(c.ApprovedBy) && g.OnTimeout == "Approve"
	if len(people) < required(g) && !byTimeout {
		return fmt.Errorf("step %d called %s/%s with %d approval(s), and its gate %s now needs %d", n, c.Server, c.Tool, len(people), g.Name, required(g))
	}
	return nil
}
