package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// Property: whatever a model asks for, the guard before each call keeps the run within
// limits.maxToolCalls and within loopDetection.maxRepeatedToolCalls of any one tool and
// arguments, and the first call it refuses is refused for the right reason, with the evidence.
func TestPropertyToolCallGuards(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxCalls := int32(uniform(t, 0, 12, "maxToolCalls"))
		maxRepeated := int32(uniform(t, 1, 4, "maxRepeatedToolCalls"))
		p, errs := NewPlan(MakeConfig("c", "ns").Agents(MakeAgent("a")).MaxToolCalls(maxCalls).MaxRepeatedToolCalls(maxRepeated).Obj().Spec, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		uses := &ToolUses{}
		counts := map[string]int32{}
		var made int32
		n := uniform(t, 1, 40, "calls")
		for i := range n {
			use := ToolUse{
				Server: pick(t, []string{"crm", "memory"}, "server"),
				Tool:   pick(t, []string{"lookup", "search"}, "tool"),
				Digest: pick(t, []string{"d1", "d2", "d3"}, "digest"),
				Step:   int32(1 + i/3),
			}
			key := use.Server + "/" + use.Tool + "#" + use.Digest
			trip, stop := CheckToolCall(p, made, uses, use)
			switch {
			case made >= maxCalls:
				if !stop || trip.Reason != v1alpha1.ReasonToolCallLimitExceeded || !strings.Contains(trip.Message, fmt.Sprint(maxCalls)) {
					t.Fatalf("call %d past maxToolCalls %d: %v %+v", made+1, maxCalls, stop, trip)
				}
				return
			case counts[key] >= maxRepeated:
				if !stop || trip.Reason != v1alpha1.ReasonLoopDetected || trip.Loop == nil ||
					trip.Loop.Detector != v1alpha1.DetectorRepeatedToolCall || trip.Loop.Pattern[0] != use.Server+"/"+use.Tool {
					t.Fatalf("call %d repeats %s %d times, max %d: %v %+v", made+1, key, counts[key], maxRepeated, stop, trip)
				}
				if got := trip.Loop.Steps[len(trip.Loop.Steps)-1]; got != use.Step || len(trip.Loop.Steps) != int(min(counts[key], maxToolUseSteps))+1 {
					t.Fatalf("evidence steps %v for a call at step %d seen %d times", trip.Loop.Steps, use.Step, counts[key])
				}
				return
			case stop:
				t.Fatalf("call %d refused with %d made (max %d) and %s seen %d times (max %d): %+v", made+1, made, maxCalls, key, counts[key], maxRepeated, trip)
			}
			uses.Add(use)
			counts[key]++
			made++
			if uses.Count(use) != counts[key] {
				t.Fatalf("counted %d, want %d", uses.Count(use), counts[key])
			}
		}
	})
}

// toolTeam is one agent with a CRM tool behind a gate of two approvers, and a memory server.
func toolTeam() *ConfigWrapper {
	return MakeConfig("tools", "ns").
		MCPServer("memory", "http://memory.tools:8080/mcp").HTTPTool("crm", "http://crm.tools/lookup").
		Agents(MakeAgent("agent").Terminator().Tools(Uses("memory"), Uses("crm").Approved(2).SideEffects()))
}

func heldAtCRM(t *testing.T, p *Plan) v1alpha1.AgentRunStatus {
	t.Helper()
	call := ToolCall{Index: 2, ID: "c2", Server: "crm", Tool: "crm", Arguments: json.RawMessage(`{"email":"a@example.com"}`)}
	res := StepResult{Agent: "agent", Input: "task", Result: turn{Tokens: 50, ToolCalls: 1,
		Held: &Held{Gate: "tool/crm/crm", Call: call}}}
	st := Apply(p, started(p), res, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.PendingApproval == nil || st.PendingApproval.Gate != "tool/crm/crm" {
		t.Fatalf("not held at the tool's gate: %s %+v", st.Phase, st.PendingApproval)
	}
	return st
}

func TestAToolCallWaitsAtItsGateInsideTheStep(t *testing.T) {
	p := gatedPlan(t, toolTeam())
	st := heldAtCRM(t, p)
	want := v1alpha1.PendingToolCall{Server: "crm", Tool: "crm", Step: 1, Call: 2, Arguments: `{"email":"a@example.com"}`}
	if tc := st.PendingApproval.ToolCall; tc == nil || *tc != want {
		t.Fatalf("pending call %+v, want %+v", tc, want)
	}
	// The step is not over: nothing of it is in the sequence, but what it used counts.
	if st.StepCount != 0 || len(st.HandoffSequence) != 0 || st.TokensUsed != 50 || st.ToolCalls != 1 {
		t.Fatalf("steps %d sequence %v tokens %d calls %d", st.StepCount, st.HandoffSequence, st.TokensUsed, st.ToolCalls)
	}

	// Two approvers are needed; after them the same step goes on.
	d := Decide(p, st, decision(1, "approve", "tool/crm/crm", "alice"), t0.Add(time.Minute))
	if d.Status.Phase != v1alpha1.PhaseAwaitingApproval {
		t.Fatalf("one approval of two passed the gate: %s", d.Status.Phase)
	}
	d = Decide(p, d.Status, decision(2, "approve", "tool/crm/crm", "alice"), t0.Add(time.Minute))
	if d.Status.Phase != v1alpha1.PhaseAwaitingApproval || !strings.Contains(conditionOf(d.Status, v1alpha1.ConditionDecision).Message, "already approved") {
		t.Fatalf("the same person counted twice: %s", d.Status.Phase)
	}
	d = Decide(p, d.Status, decision(3, "approve", "tool/crm/crm", "bob"), t0.Add(2*time.Minute))
	s := d.Status
	if s.Phase != v1alpha1.PhaseRunning || s.PendingApproval != nil || s.Input != "task" {
		t.Fatalf("the gate should pass back into the step: %s %+v input %q", s.Phase, s.PendingApproval, s.Input)
	}
	for _, a := range s.Approvals {
		if a.Step != 1 || a.ToolCall != 2 || a.Decision != v1alpha1.RecordApproved {
			t.Fatalf("approval record %+v does not name the call", a)
		}
	}
	if next := Next(p, &s); next.Number != 1 || next.Agent != "agent" || next.Input != "task" {
		t.Fatalf("the held step should go on: %+v", next)
	}

	// The step ends: it counts once, with its calls; what the gate counted is not counted again.
	s = Apply(p, s, StepResult{Agent: "agent", Input: "task", Result: turn{Output: "done", Tokens: 80, CountedTokens: 50, ToolCalls: 2, CountedToolCalls: 1}}, t0.Add(3*time.Minute)).Status
	if s.Phase != v1alpha1.PhaseSucceeded || s.StepCount != 1 || s.TokensUsed != 80 || s.ToolCalls != 2 || s.HandoffSequence[0].ToolCalls != 2 || s.HandoffSequence[0].Tokens != 80 {
		t.Fatalf("phase %s steps %d tokens %d calls %d sequence %+v", s.Phase, s.StepCount, s.TokensUsed, s.ToolCalls, s.HandoffSequence)
	}
}

func TestARejectedToolCallGoesBackToTheAgent(t *testing.T) {
	p := gatedPlan(t, toolTeam())
	st := heldAtCRM(t, p)
	q := decision(1, "reject", "tool/crm/crm", "carol")
	q.Revise = "agent"
	d := Decide(p, st, q, t0.Add(time.Minute))
	if d.Status.Phase != v1alpha1.PhaseAwaitingApproval || !strings.Contains(conditionOf(d.Status, v1alpha1.ConditionDecision).Message, "cannot send") {
		t.Fatalf("revise on a tool's gate should be refused: %s %+v", d.Status.Phase, conditionOf(d.Status, v1alpha1.ConditionDecision))
	}
	q = decision(2, "reject", "tool/crm/crm", "carol")
	q.Feedback = "not this customer"
	s := Decide(p, d.Status, q, t0.Add(time.Minute)).Status
	if s.Phase != v1alpha1.PhaseRunning || s.TerminationReason != "" {
		t.Fatalf("a rejected call should not end the run: %s %s", s.Phase, s.TerminationReason)
	}
	last := s.Approvals[len(s.Approvals)-1]
	if last.Decision != v1alpha1.RecordRejected || last.By != "carol" || last.Feedback != "not this customer" || last.Step != 1 || last.ToolCall != 2 {
		t.Fatalf("rejection record %+v", last)
	}
}

func TestAToolGateTimesOutLikeAnyGate(t *testing.T) {
	c := toolTeam()
	c.Spec.Agents[0].Tools[1].Gate = &v1alpha1.ToolGate{Required: 1, Timeout: v1alpha1.NewDuration(time.Hour), OnTimeout: "Approve"}
	p := gatedPlan(t, c)
	st := heldAtCRM(t, p)
	if deadline, ok := Deadline(p, &st); !ok || !deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("deadline %v %v", deadline, ok)
	}
	d, ok := CheckWaiting(p, st, t0.Add(time.Hour))
	last := d.Status.Approvals[len(d.Status.Approvals)-1]
	if !ok || d.Status.Phase != v1alpha1.PhaseRunning || last.By != v1alpha1.ByTimeout || last.ToolCall != 2 {
		t.Fatalf("the timeout should approve the call: %v %s %+v", ok, d.Status.Phase, last)
	}
}

func TestAToolGuardEndsTheRunWithItsEvidence(t *testing.T) {
	p := gatedPlan(t, toolTeam())
	loop := &v1alpha1.LoopStatus{Detector: v1alpha1.DetectorRepeatedToolCall, Pattern: []string{"memory/search"}, Steps: []int32{1, 1, 1, 1}}
	res := StepResult{Agent: "agent", Input: "task", Result: turn{Tokens: 10, ToolCalls: 3,
		Trip: &ToolTrip{Reason: v1alpha1.ReasonLoopDetected, Message: "RepeatedToolCall: memory/search ...", Loop: loop}}}
	s := Apply(p, started(p), res, t0).Status
	if s.Phase != v1alpha1.PhaseFailed || s.TerminationReason != v1alpha1.ReasonLoopDetected || s.Loop == nil ||
		s.Loop.Detector != v1alpha1.DetectorRepeatedToolCall || s.ToolCalls != 3 || s.StepCount != 1 {
		t.Fatalf("phase %s reason %s loop %+v calls %d", s.Phase, s.TerminationReason, s.Loop, s.ToolCalls)
	}
}

func TestToolConfigIsChecked(t *testing.T) {
	c := toolTeam()
	c.Spec.Agents[0].Tools = append(c.Spec.Agents[0].Tools, v1alpha1.AgentTools{Server: "nowhere"})
	c.Spec.ToolServers[1].HTTP.InputSchema = rawJSON(`{"$ref": "file:///etc/passwd"}`)
	c.Spec.Agents[0].Script = []v1alpha1.ScriptTurn{*Says("x").Calls("elsewhere", "t", `{}`).ScriptTurn.DeepCopy()}
	_, errs := NewPlan(c.Obj().Spec, nil)
	fields := map[string]bool{}
	for _, e := range errs {
		fields[e.Field] = true
	}
	for _, f := range []string{"spec.agents[0].tools[2].server", "spec.toolServers[1].http.inputSchema", "spec.agents[0].script[0].toolCalls[0].server"} {
		if !fields[f] {
			t.Errorf("no error names %s: %v", f, errs)
		}
	}
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
