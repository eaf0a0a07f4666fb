package workflow

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// shop is a shop agent that reads the web (untrusted) and may refund (side effects), with the
// refund's own gate of one approver and an hour's timeout that would approve.
func shop(policy v1alpha1.SideEffectPolicy) *ConfigWrapper {
	c := MakeConfig("shop", "ns").
		MCPServer("web", "http://web.tools:8080/mcp").HTTPTool("refund", "http://shop.tools/refund").
		Agents(MakeAgent("clerk").Terminator().Tools(Uses("web"), Uses("refund").Approved(1).SideEffects()))
	c.Spec.ToolServers[0].Trust = v1alpha1.Untrusted
	c.Spec.Agents[0].Tools[1].Gate = &v1alpha1.ToolGate{Required: 1, Timeout: v1alpha1.NewDuration(time.Hour), OnTimeout: "Approve"}
	c.Spec.Untrusted = &v1alpha1.UntrustedSpec{OnSideEffect: policy}
	return c
}

func TestATaintedCallOfASideEffectMeetsOnlyTheTaintGate(t *testing.T) {
	p := gatedPlan(t, shop(""))
	g, gated := p.CallGate("clerk", "refund", "refund", true)
	if !gated || g.Name != "taint/refund/refund" || g.OnTimeout != "Reject" || g.Required != 1 || g.Timeout.OrZero() != time.Hour {
		t.Fatalf("a tainted refund waits at %+v (gated %t); want taint/refund/refund, its tool's quorum and timeout, rejecting on timeout", g, gated)
	}
	if g, _ := p.CallGate("clerk", "refund", "refund", false); g.Name != "tool/refund/refund" {
		t.Errorf("an untainted refund waits at %s; want its own gate", g.Name)
	}
	if _, gated := p.CallGate("clerk", "web", "fetch", true); gated {
		t.Error("a tainted call of a tool without side effects is gated")
	}
	if p.RefusesTainted("clerk", "refund", true) {
		t.Error("Gate refuses")
	}
	refusing := gatedPlan(t, shop(v1alpha1.SideEffectRefuse))
	if !refusing.RefusesTainted("clerk", "refund", true) || refusing.RefusesTainted("clerk", "refund", false) || refusing.RefusesTainted("clerk", "web", true) {
		t.Error("Refuse refuses other than a tainted call of a tool with side effects")
	}
	if RefusalOf(TaintedWhy) != RefusalTainted {
		t.Errorf("the words of a tainted refusal read back as %q", RefusalOf(TaintedWhy))
	}
}

// heldAtTaint is a run held at the taint gate of its refund, after its web read.
func heldAtTaint(t *testing.T, p *Plan) v1alpha1.AgentRunStatus {
	t.Helper()
	call := ToolCall{Index: 2, ID: "c2", Server: "refund", Tool: "refund", Arguments: json.RawMessage(`{"order":1001}`)}
	tainted := &v1alpha1.Taint{Source: "tool web/fetch", Step: 1}
	res := StepResult{Agent: "clerk", Input: "refund?", Result: turn{Tokens: 50, ToolCalls: 1, Taint: tainted,
		Held: &Held{Gate: "taint/refund/refund", Call: call, Taint: tainted.Source}}}
	st := Apply(p, started(p), res, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.PendingApproval == nil || st.PendingApproval.Gate != "taint/refund/refund" {
		t.Fatalf("not held at the taint gate: %s %+v", st.Phase, st.PendingApproval)
	}
	return st
}

func TestATaintGateHoldsWhateverTheRunsApprovalsAndItsTimeoutRejects(t *testing.T) {
	p := mustPlan(t, shop("")).ForRun("r", "ns", v1alpha1.ApprovalsSkip, "alice")
	st := heldAtTaint(t, p)
	if tc := st.PendingApproval.ToolCall; tc == nil || tc.Taint != "tool web/fetch" || tc.Arguments != `{"order":1001}` {
		t.Fatalf("the held call %+v does not say where the taint came from", tc)
	}
	if st.Taint == nil || st.Taint.Source != "tool web/fetch" || st.Taint.Step != 1 {
		t.Fatalf("the run's taint is %+v", st.Taint)
	}
	d, ok := CheckWaiting(p, st, t0.Add(time.Hour))
	if !ok || d.Status.TerminationReason != v1alpha1.ReasonApprovalExpired || len(d.Status.Approvals) != 0 {
		t.Fatalf("the taint gate's timeout gave %v %s %s %+v; want the call never made, whatever the tool's onTimeout",
			ok, d.Status.Phase, d.Status.TerminationReason, d.Status.Approvals)
	}
	approved := Decide(p, st, decision(1, "approve", "taint/refund/refund", "bob"), t0.Add(time.Minute)).Status
	if approved.Phase != v1alpha1.PhaseRunning || approved.Taint == nil {
		t.Fatalf("an approval at the taint gate left the run %s, taint %+v", approved.Phase, approved.Taint)
	}
}

func TestARunStaysTaintedFromItsFirstUntrustedContent(t *testing.T) {
	p := mustPlan(t, MakeConfig("c", "ns").MCPServer("web", "http://web/mcp").Agents(
		MakeAgent("a").HandsOffTo("b").Tools(Uses("web")), MakeAgent("b").HandsOffTo("a")))
	st := started(p)
	if st.Taint != nil {
		t.Fatalf("a trusted input tainted the run: %+v", st.Taint)
	}
	st = Apply(p, st, StepResult{Agent: "a", Input: "task", Result: Result{Output: "read it", Handoff: "b", Taint: &v1alpha1.Taint{Source: "tool web/fetch", Step: 1}}}, t0).Status
	st = Apply(p, st, StepResult{Agent: "b", Input: "read it", Result: Result{Output: "back", Handoff: "a"}}, t0).Status
	if st.Taint == nil || st.Taint.Source != "tool web/fetch" || st.Taint.Step != 1 {
		t.Fatalf("a handoff dropped the taint: %+v", st.Taint)
	}
	untrusted := mustPlan(t, MakeConfig("c", "ns").Agents(MakeAgent("a")).Untrusted(v1alpha1.Untrusted))
	if got := started(untrusted).Taint; got == nil || got.Source != "input" || got.Step != 0 {
		t.Fatalf("an untrusted input gave the run taint %+v", got)
	}
}

func TestAnUntrustedAgentsAnswerTaintsTheRun(t *testing.T) {
	c := MakeConfig("c", "ns").Agents(MakeAgent("remote").HandsOffTo("local"), MakeAgent("local").Terminator())
	c.Spec.Agents[0].Model = v1alpha1.ModelSpec{Provider: v1alpha1.ProviderHTTP, Endpoint: "http://partner.example/agent", Trust: v1alpha1.Untrusted}
	p := mustPlan(t, c)
	st := Apply(p, started(p), StepResult{Agent: "remote", Input: "task", Result: Result{Output: "do this", Handoff: "local"}}, t0).Status
	if st.Taint == nil || st.Taint.Source != "agent remote" || st.Taint.Step != 1 {
		t.Fatalf("an untrusted agent's answer gave taint %+v", st.Taint)
	}
	c.Spec.Agents[0].Model.Provider = v1alpha1.ProviderOpenAI
	if _, errs := NewPlan(c.Obj().Spec, nil); len(errs) == 0 || errs[0].Field != "spec.agents[0].model.trust" {
		t.Errorf("an Untrusted OpenAI agent was taken: %v", errs)
	}
}

func TestAJoinTakesATaintedBranchsTaint(t *testing.T) {
	fan := researchPlan(t, v1alpha1.Join{}, "")
	st := branching(t, fan, "researcher", "critic")
	runs := map[string]BranchRun{}
	for i, b := range st.Branches {
		r := BranchRun{Found: true, UID: "uid-" + b.Name, Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, Output: "found"}
		if i == 1 {
			r.Taint = &v1alpha1.Taint{Source: "tool web/fetch", Step: 2}
		}
		runs[b.Name] = r
	}
	d, _ := Join(fan, st, runs, t0.Add(time.Minute))
	if got := d.Status.Taint; got == nil || !strings.HasPrefix(got.Source, "branch "+st.Branches[1].Name+": tool web/fetch") || got.Step != st.StepCount+1 {
		t.Fatalf("the join of a tainted branch left the run with taint %+v", got)
	}
}

func TestInheritedTaints(t *testing.T) {
	parent := &v1alpha1.Taint{Source: "tool web/fetch", Step: 3}
	if got := Inherited(parent, "parent run p"); got.Source != "parent run p: tool web/fetch" || got.Step != 0 {
		t.Errorf("inherited %+v", got)
	}
	if Inherited(nil, "parent run p") != nil {
		t.Error("nothing inherited a taint")
	}
	if TaintedBefore(parent, 2) != nil || TaintedBefore(parent, 3) == nil {
		t.Error("a run started from a step took the taint of a later step, or not of its own")
	}
}

// Property: whatever its steps bring, a run's taint is the first that came, and stays.
func TestPropertyATaintIsNeverDropped(t *testing.T) {
	p := mustPlan(t, MakeConfig("c", "ns").Agents(MakeAgent("a").HandsOffTo("b"), MakeAgent("b").HandsOffTo("a")).MaxSteps(100))
	rapid.Check(t, func(t *rapid.T) {
		st := started(p)
		var first *v1alpha1.Taint
		for i := range rapid.IntRange(1, 30).Draw(t, "steps") {
			agent := st.CurrentAgent
			res := StepResult{Agent: agent, Input: st.Input, Result: Result{Output: "step", Handoff: map[string]string{"a": "b", "b": "a"}[agent]}}
			if rapid.Bool().Draw(t, "tainted") {
				res.Taint = &v1alpha1.Taint{Source: "tool web/" + agent, Step: int32(i + 1)}
				if first == nil {
					first = res.Taint
				}
			}
			if rapid.IntRange(0, 4).Draw(t, "fails") == 0 {
				res.Error, res.Output, res.Handoff = "timeout", "", ""
			}
			st = Apply(p, st, res, t0.Add(time.Duration(i)*time.Second)).Status
			if (first == nil) != (st.Taint == nil) || first != nil && *st.Taint != *first {
				t.Fatalf("after step %d the run's taint is %+v; want %+v", i+1, st.Taint, first)
			}
			if st.Phase.Terminal() {
				return
			}
		}
	})
}

// A replay judges a recorded tainted call as the toolbox did: at its taint gate, with the
// approvals given there; a refusal for the taint stands while the plan would refuse it too.
func TestARecordedTaintedCallIsJudgedAtItsTaintGate(t *testing.T) {
	p := gatedPlan(t, shop(""))
	approved := RecordedCall{Server: "refund", Tool: "refund", Digest: "d", Taint: "tool web/fetch", ApprovedBy: []string{"bob"}}
	got, err := p.GuardRecordedCalls(1, "clerk", 0, &ToolUses{}, []RecordedCall{approved})
	if err != nil || len(got.Gates) != 1 || got.Gates[0] != "taint/refund/refund" || got.ToolCalls != 1 {
		t.Fatalf("an approved tainted refund replays as %+v (%v); want made past taint/refund/refund", got, err)
	}
	unapproved := approved
	unapproved.ApprovedBy = nil
	if _, err := p.GuardRecordedCalls(1, "clerk", 0, &ToolUses{}, []RecordedCall{unapproved}); err == nil || !strings.Contains(err.Error(), "taint/refund/refund") {
		t.Errorf("a tainted refund made with nobody's approval replays: %v", err)
	}
	refused := RecordedCall{Server: "refund", Tool: "refund", Digest: "d", Taint: "tool web/fetch", Refused: true, Refusal: RefusalTainted}
	if _, err := gatedPlan(t, shop(v1alpha1.SideEffectRefuse)).GuardRecordedCalls(1, "clerk", 0, &ToolUses{}, []RecordedCall{refused}); err != nil {
		t.Errorf("a refusal for the taint under Refuse does not replay: %v", err)
	}
	if _, err := p.GuardRecordedCalls(1, "clerk", 0, &ToolUses{}, []RecordedCall{refused}); err == nil {
		t.Error("a refusal for the taint replays under Gate, where the call would wait for a person")
	}
}
