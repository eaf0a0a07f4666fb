package workflow

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// triageTeam is the invoice-triage supervisor: it routes to billing, disputes or a generalist.
func triageTeam() *ConfigWrapper {
	c := MakeConfig("triage", "ns").Mode(v1alpha1.ModeSupervisor).Agents(
		MakeAgent("supervisor"), MakeAgent("billing").HandsOffTo("erp"), MakeAgent("disputes"),
		MakeAgent("generalist"), MakeAgent("erp"), MakeAgent("reporter").Terminator(),
	).Entrypoint("supervisor")
	c.Spec.Routing = &v1alpha1.Routing{Supervisor: "supervisor", MinConfidence: ptr.To(0.7), DefaultAgent: "generalist", MaxReroutes: ptr.To[int32](2)}
	return c
}

func routeTo(target string, confidence float64, fallback string) turn {
	return turn{Output: "handling it", Routing: &v1alpha1.RoutingDecision{Target: target, Confidence: &confidence, Reason: "looks like " + target, Fallback: fallback}}
}

func TestSupervisorRouting(t *testing.T) {
	cases := map[string]struct {
		decision turn
		to       string
		reason   string
	}{
		"a confident decision":                              {routeTo("billing", 0.9, ""), "billing", "routed to billing (confidence 0.90): looks like billing"},
		"low confidence uses the decision's fallback":       {routeTo("billing", 0.4, "disputes"), "disputes", "fallback disputes: confidence 0.40 for billing is below minConfidence 0.70"},
		"low confidence without fallback uses defaultAgent": {routeTo("billing", 0.4, ""), "generalist", "default agent generalist: confidence 0.40 for billing is below minConfidence 0.70"},
		"an unknown target uses defaultAgent":               {routeTo("legal", 0.99, ""), "generalist", `default agent generalist: target legal is not a child agent`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustPlan(t, triageTeam())
			st := drive(t, p, tc.decision)
			last := st.HandoffSequence[0]
			if st.CurrentAgent != tc.to || last.Reason != tc.reason || st.Depth != 1 {
				t.Fatalf("got %s (%q, depth %d), want %s (%q)", st.CurrentAgent, last.Reason, st.Depth, tc.to, tc.reason)
			}
			if last.Confidence == nil || *last.Confidence != *tc.decision.Routing.Confidence {
				t.Fatalf("the routing's confidence is not recorded: %v", last.Confidence)
			}
		})
	}
}

func TestSupervisorChildrenReturnAndDelegateWithinDepth(t *testing.T) {
	c := triageTeam()
	c.Spec.Limits.MaxHandoffDepth = ptr.To[int32](1)
	p := mustPlan(t, c)
	st := drive(t, p, routeTo("billing", 0.9, ""), turn{Output: "need the ERP", Handoff: "erp"})
	if st.CurrentAgent != "supervisor" || st.ErrorCount != 1 || !strings.Contains(st.HandoffSequence[1].Reason, "depth 2 would pass maxHandoffDepth 1") {
		t.Fatalf("delegation past the depth must fail back to the supervisor: %s errors %d %q", st.CurrentAgent, st.ErrorCount, st.HandoffSequence[1].Reason)
	}
	p = mustPlan(t, triageTeam())
	st = drive(t, p, routeTo("billing", 0.9, ""), turn{Output: "need the ERP", Handoff: "erp"}, turn{Output: "invoice 42 is paid"})
	if st.CurrentAgent != "supervisor" || st.Depth != 0 || st.Input != "invoice 42 is paid" || st.HandoffSequence[1].To != "erp" {
		t.Fatalf("the child's answer goes back to the supervisor: %s depth %d input %q", st.CurrentAgent, st.Depth, st.Input)
	}
}

func TestSupervisorReroutesThenRoutingExhausted(t *testing.T) {
	p := mustPlan(t, triageTeam())
	fail := turn{}
	st := started(p)
	for i := 0; i < 3; i++ {
		decision := routeTo([]string{"billing", "disputes", "generalist"}[i], 0.9, "")
		decision.Output = fmt.Sprintf("attempt %d", i)
		st = Apply(p, st, StepResult{Agent: "supervisor", Input: st.Input, Result: decision}, t0).Status
		st = Apply(p, st, StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: fail, Error: "ERP unreachable"}, t0).Status
	}
	if st.TerminationReason != v1alpha1.ReasonRoutingExhausted {
		t.Fatalf("want RoutingExhausted after 3 failed children with maxReroutes 2, got %s: %s", st.TerminationReason, st.TerminationMessage)
	}
	if st.TerminationMessage != "routing exhausted: 3 child steps failed in a row, more than maxReroutes 2; last: generalist at step 6" {
		t.Fatalf("message %q", st.TerminationMessage)
	}
}

func TestOutputSchemaRepairs(t *testing.T) {
	schema := `{"type":"object","required":["answer","confidence"],"properties":{"answer":{"type":"string"},"confidence":{"type":"number","minimum":0,"maximum":1}}}`
	c := MakeConfig("typed", "ns").Agents(MakeAgent("triager").Terminator())
	c.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(schema)}
	p := mustPlan(t, c)

	st := drive(t, p, turn{Output: `{"answer": "pay it", "confidence": 1.5}`})
	if st.Phase != v1alpha1.PhaseRunning || st.CurrentAgent != "triager" || st.HandoffSequence[0].Outcome != v1alpha1.OutcomeInvalid {
		t.Fatalf("an invalid answer is sent back for repair: %s %+v", st.Phase, st.HandoffSequence[0])
	}
	next := Next(p, &st)
	if !next.Repairs || next.Attempt != 1 {
		t.Fatalf("the next step repairs the answer: %+v", next)
	}
	d := Apply(p, started(p), StepResult{Agent: "triager", Input: "task", Result: turn{Output: `{"answer": "pay it", "confidence": 1.5}`}}, t0)
	if len(d.Context) != 2 || d.Context[0].Text != `{"answer": "pay it", "confidence": 1.5}` ||
		d.Context[1].Kind != ContextInvalid || !strings.Contains(d.Context[1].Text, "/confidence") {
		t.Fatalf("the answer and the errors go to the context for the repair: %+v", d.Context)
	}
	done := drive(t, p, turn{Output: `{"answer": "pay it", "confidence": 1.5}`}, turn{Output: "```json\n{\"answer\": \"pay it\", \"confidence\": 0.8}\n```"})
	if done.TerminationReason != v1alpha1.ReasonCompleted || done.Output != `{"answer":"pay it","confidence":0.8}` {
		t.Fatalf("the repaired, structured value is the output: %s %q", done.TerminationReason, done.Output)
	}
	bad := turn{Output: "I think we should pay"}
	failed := drive(t, p, bad, bad, bad)
	if failed.TerminationReason != v1alpha1.ReasonInvalidOutput || failed.StepCount != 3 ||
		!strings.HasPrefix(failed.TerminationMessage, "triager's output still does not match its outputSchema after 2 repairs: the answer is not a JSON value") {
		t.Fatalf("after 2 repairs the run ends InvalidOutput: %s after %d: %s", failed.TerminationReason, failed.StepCount, failed.TerminationMessage)
	}
}

func TestEachDecisionSaysWhatItAddsToTheContext(t *testing.T) {
	p := mustPlan(t, team())
	st := started(p)
	var got []string
	for i, a := range []turn{say("plan A", "worker"), say("did A", "lead"), {}} {
		res := StepResult{Agent: st.CurrentAgent, Input: st.Input, Result: a}
		if i == 2 {
			res.Error = "boom"
		}
		d := Apply(p, st, res, t0)
		for _, c := range d.Context {
			got = append(got, fmt.Sprintf("%d:%s:%s:%s", c.Step, c.From, c.Kind, c.Text))
		}
		st = d.Status
	}
	want := []string{"1:lead:Output:plan A", "2:worker:Output:did A", "3:lead:Failed:boom"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("context %v", got)
	}
	long := strings.Repeat("x", 100_000)
	d := Apply(p, started(p), StepResult{Agent: "lead", Input: "task", Result: say(long, "worker")}, t0)
	if d.Context[0].Text != long {
		t.Fatalf("the context holds the whole output: %d characters", len(d.Context[0].Text))
	}
}

// TestAGateAfterAnAgentWaitsForItsRepairedAnswer checks that people are asked to judge an
// agent's answer only once it matches its outputSchema: an answer sent back for repair opens no
// gate, the repaired one does.
func TestAGateAfterAnAgentWaitsForItsRepairedAnswer(t *testing.T) {
	schema := `{"type":"object","required":["plan"],"properties":{"plan":{"type":"string"}}}`
	c := MakeConfig("typed", "ns").Agents(
		MakeAgent("planner").HandsOffTo("worker"),
		MakeAgent("worker").Terminator(),
	).Gate("plan", "planner", 1)
	c.Spec.Agents[0].OutputSchema = &apiextensionsv1.JSON{Raw: []byte(schema)}
	p := mustPlan(t, c).ForRun("r", "ns", v1alpha1.ApprovalsRequired, "")

	st := Apply(p, started(p), StepResult{Agent: "planner", Input: "task", Result: turn{Output: "not JSON", Handoff: "worker"}}, t0).Status
	if st.Phase != v1alpha1.PhaseRunning || st.PendingApproval != nil || st.CurrentAgent != "planner" {
		t.Fatalf("an answer sent back for repair opened a gate: %s %+v, %s has control", st.Phase, st.PendingApproval, st.CurrentAgent)
	}
	st = Apply(p, st, StepResult{Agent: "planner", Input: "task", Result: turn{Output: `{"plan":"three steps"}`, Handoff: "worker"}}, t0).Status
	if st.Phase != v1alpha1.PhaseAwaitingApproval || st.PendingApproval == nil || st.PendingApproval.Gate != "plan" {
		t.Fatalf("the repaired answer did not open the gate: %s %+v", st.Phase, st.PendingApproval)
	}
}
