package agents_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/test/fakes"
)

// parallelOpenAIAgent is the OpenAI agent triage, which may fan out to network-team and billing,
// up to maxBranches at once (nil: the default).
func parallelOpenAIAgent(t *testing.T, server *fakes.OpenAI, maxBranches *int32) (agents.Agent, agents.Request) {
	t.Helper()
	a, req := openAIAgent(t, server)
	req.Agent.Parallel = &v1alpha1.Parallel{MaxBranches: maxBranches}
	return a, req
}

// offeredTool is the tool of that name the request offered, with its arguments' schema.
func offeredTool(sent fakes.ChatRequest, name string) (map[string]any, bool) {
	for _, tool := range sent.Tools {
		if tool.Function.Name == name {
			var schema map[string]any
			_ = json.Unmarshal(tool.Function.Parameters, &schema)
			return schema, true
		}
	}
	return nil, false
}

func fanOutCall(branches ...workflow.Branch) fakes.ToolCall {
	args, _ := json.Marshal(map[string]any{"branches": branches})
	return fakes.ToolCall{Name: "fan_out", Args: string(args)}
}

func TestOpenAIFanOutCallBecomesTheStepsBranches(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := parallelOpenAIAgent(t, server, ptr.To[int32](3))
	server.Reply(fakes.Reply{Content: "splitting the ticket", Tokens: 90, ToolCalls: []fakes.ToolCall{
		{Name: "emit_signal", Args: `{"signal":"DONE"}`},
		fanOutCall(workflow.Branch{Agent: "billing", Input: "check invoice 7"}, workflow.Branch{Agent: "network_team", Input: "check the VPN logs"}),
		{Name: "transfer_to_billing", Args: `{"reason":"later"}`},
	}})
	res, err := step(t, a, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := workflow.Result{Output: "splitting the ticket", Tokens: 90, InputTokens: 45, FinishReason: v1alpha1.FinishStop,
		Parallel: []workflow.Branch{{Agent: "billing", Input: "check invoice 7"}, {Agent: "network-team", Input: "check the VPN logs"}},
		Ignored:  []string{"emit_signal", "transfer_to_billing"}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}

	sent := server.Requests()[0]
	if got := sent.ToolNames(); !cmp.Equal(got, []string{"transfer_to_network_team", "transfer_to_billing", "fan_out", "emit_signal"}) {
		t.Fatalf("tools offered: %v", got)
	}
	schema, _ := offeredTool(sent, "fan_out")
	branches := schema["properties"].(map[string]any)["branches"].(map[string]any)
	agent := branches["items"].(map[string]any)["properties"].(map[string]any)["agent"].(map[string]any)
	if branches["minItems"] != float64(1) || branches["maxItems"] != float64(3) || !cmp.Equal(agent["enum"], []any{"network-team", "billing"}) {
		t.Fatalf("fan_out's schema: %v", schema)
	}
	if system := sent.Messages[0].Content; !strings.Contains(system, "call fan_out with up to 3 branches") {
		t.Fatalf("the system message does not say how to fan out:\n%s", system)
	}
}

func TestOpenAIOffersFanOutOnlyToAStepThatMayFanOut(t *testing.T) {
	cases := map[string]struct {
		change       func(*agents.Request)
		wantMaxItems float64 // 0: fan_out is not offered
	}{
		"an agent with parallel, by default up to 4 branches": {
			change: func(*agents.Request) {}, wantMaxItems: 4,
		},
		"an agent without parallel": {
			change: func(r *agents.Request) { r.Agent.Parallel = nil },
		},
		"a wrap-up turn": {
			change: func(r *agents.Request) { r.WrapUp = "The run used its 20 steps." },
		},
		"an agent with nothing to hand off to": {
			change: func(r *agents.Request) { r.Peers = nil },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewOpenAI()
			defer server.Close()
			a, req := parallelOpenAIAgent(t, server, nil)
			tc.change(&req)
			server.Reply(fakes.Reply{Content: "done"})
			if _, err := step(t, a, req, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			sent := server.Requests()[0]
			schema, offered := offeredTool(sent, "fan_out")
			if mentioned := strings.Contains(sent.Messages[0].Content, "fan_out"); offered != (tc.wantMaxItems > 0) || mentioned != offered {
				t.Fatalf("fan_out offered %t, in the system message %t; tools %v", offered, mentioned, sent.ToolNames())
			}
			if offered {
				if got := schema["properties"].(map[string]any)["branches"].(map[string]any)["maxItems"]; got != tc.wantMaxItems {
					t.Fatalf("maxItems %v, want %v", got, tc.wantMaxItems)
				}
			}
		})
	}
}

func TestOpenAISeveralHandoffsOfAParallelAgentFanOut(t *testing.T) {
	cases := map[string]struct {
		parallel bool
		reply    fakes.Reply
		want     workflow.Result
	}{
		"each call's reason is its branch's input, in the order called": {
			parallel: true,
			reply: fakes.Reply{Content: "two things", ToolCalls: []fakes.ToolCall{
				{Name: "transfer_to_network_team", Args: `{"reason":"the VPN drops"}`},
				{Name: "emit_signal", Args: `{"signal":"DONE"}`},
				{Name: "transfer_to_billing", Args: `{"reason":"the invoice is wrong"}`},
			}},
			want: workflow.Result{Output: "two things", FinishReason: v1alpha1.FinishStop, Ignored: []string{"emit_signal"},
				Parallel: []workflow.Branch{{Agent: "network-team", Input: "the VPN drops"}, {Agent: "billing", Input: "the invoice is wrong"}}},
		},
		"a call without a reason gives its branch the answer's text": {
			parallel: true,
			reply: fakes.Reply{Content: "VPN and invoice", ToolCalls: []fakes.ToolCall{
				{Name: "transfer_to_network_team", Args: `{}`}, {Name: "transfer_to_billing", Args: `not json`},
			}},
			want: workflow.Result{Output: "VPN and invoice", FinishReason: v1alpha1.FinishStop,
				Parallel: []workflow.Branch{{Agent: "network-team", Input: "VPN and invoice"}, {Agent: "billing", Input: "VPN and invoice"}}},
		},
		"without a reason or a text, a branch gets the step's input": {
			parallel: true,
			reply:    fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "transfer_to_billing"}, {Name: "transfer_to_billing"}}},
			want: workflow.Result{FinishReason: v1alpha1.FinishStop,
				Parallel: []workflow.Branch{{Agent: "billing", Input: "Ticket 7: VPN drops"}, {Agent: "billing", Input: "Ticket 7: VPN drops"}}},
		},
		"one handoff of a parallel agent is a handoff": {
			parallel: true,
			reply: fakes.Reply{ToolCalls: []fakes.ToolCall{
				{Name: "transfer_to_billing", Args: `{"reason":"invoice"}`}, {Name: "emit_signal", Args: `{"signal":"DONE"}`},
			}},
			want: workflow.Result{Handoff: "billing", Reason: "invoice", FinishReason: v1alpha1.FinishStop, Ignored: []string{"emit_signal"}},
		},
		"without parallel, the first handoff wins": {
			reply: fakes.Reply{ToolCalls: []fakes.ToolCall{
				{Name: "transfer_to_network_team", Args: `{"reason":"VPN"}`}, {Name: "transfer_to_billing", Args: `{"reason":"invoice"}`},
			}},
			want: workflow.Result{Handoff: "network-team", Reason: "VPN", FinishReason: v1alpha1.FinishStop, Ignored: []string{"transfer_to_billing"}},
		},
		"without parallel, a fan_out call is not used": {
			reply: fakes.Reply{Content: "x", ToolCalls: []fakes.ToolCall{fanOutCall(workflow.Branch{Agent: "billing", Input: "y"})}},
			want:  workflow.Result{Output: "x", FinishReason: v1alpha1.FinishStop, Ignored: []string{"fan_out"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewOpenAI()
			defer server.Close()
			a, req := parallelOpenAIAgent(t, server, nil)
			if !tc.parallel {
				req.Agent.Parallel = nil
			}
			server.Reply(tc.reply)
			res, err := step(t, a, req, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Fatalf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenAIMalformedFanOutIsAClearFailure(t *testing.T) {
	many := make([]workflow.Branch, v1alpha1.MaxBranchesPerFanOut+1)
	for i := range many {
		many[i] = workflow.Branch{Agent: "billing", Input: fmt.Sprint(i)}
	}
	cases := map[string]struct {
		call    fakes.ToolCall
		wantErr string
		want    []workflow.Branch
	}{
		"arguments that are not JSON": {
			call:    fakes.ToolCall{Name: "fan_out", Args: `{"branches": [`},
			wantErr: `invalid answer: agent triage called fan_out with arguments that are not {"branches": [{"agent": ..., "input": ...}]}: unexpected end of JSON input`,
		},
		"branches that are not a list": {
			call:    fakes.ToolCall{Name: "fan_out", Args: `{"branches": "billing"}`},
			wantErr: "invalid answer: agent triage called fan_out with arguments that are not",
		},
		"no branches": {
			call:    fakes.ToolCall{Name: "fan_out", Args: `{"branches": []}`},
			wantErr: "invalid answer: agent triage called fan_out with no branches",
		},
		"more branches than any fan-out may have": {
			call:    fanOutCall(many...),
			wantErr: "invalid answer: the answer asks for 17 branches, and a fan-out has at most 16",
		},
		"an agent that is no handoff is left for the core to refuse": {
			call: fanOutCall(workflow.Branch{Agent: "payroll", Input: "x"}),
			want: []workflow.Branch{{Agent: "payroll", Input: "x"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewOpenAI()
			defer server.Close()
			a, req := parallelOpenAIAgent(t, server, nil)
			server.Reply(fakes.Reply{Tokens: 50, ToolCalls: []fakes.ToolCall{tc.call}})
			res, err := step(t, a, req, 10*time.Second)
			if tc.wantErr == "" {
				if err != nil || !cmp.Equal(res.Parallel, tc.want) {
					t.Fatalf("got %v, branches %+v; want %+v", err, res.Parallel, tc.want)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !errors.Is(err, agents.ErrInvalidAnswer) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if res.Tokens != 50 || res.Parallel != nil {
				t.Fatalf("a failed step reports its usage only: %+v", res)
			}
		})
	}
}

func TestOpenAIMalformedFanOutAfterToolCallsKeepsTheStepsUsage(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	a, req := parallelOpenAIAgent(t, server, nil)
	req.Tools = &box{}
	server.Reply(
		fakes.Reply{Tokens: 30, ToolCalls: []fakes.ToolCall{{Name: "s__echo", Args: `{}`}}},
		fakes.Reply{Tokens: 40, ToolCalls: []fakes.ToolCall{{Name: "fan_out", Args: `nonsense`}}},
	)
	res, err := step(t, a, req, 10*time.Second)
	if !errors.Is(err, agents.ErrInvalidAnswer) || res.Tokens != 70 || res.ToolCalls != 1 {
		t.Fatalf("got %v with %d tokens and %d tool calls, want the error with 70 tokens and 1 call", err, res.Tokens, res.ToolCalls)
	}
}

func TestHTTPAgentParallelBecomesTheStepsBranches(t *testing.T) {
	server := fakes.NewHTTPAgent(fakes.HTTPAnswer{Body: map[string]any{
		"output": "two drafts", "tokens": 12,
		"parallel": []map[string]any{{"agent": "writer", "input": "draft the intro"}, {"agent": "editor", "input": "tighten section 2"}},
	}})
	defer server.Close()
	a, req := httpAgent(t, server)
	req.Agent.Parallel = &v1alpha1.Parallel{MaxBranches: ptr.To[int32](2)}
	res, err := step(t, a, req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := workflow.Result{Output: "two drafts", Tokens: 12, FinishReason: v1alpha1.FinishStop,
		Parallel: []workflow.Branch{{Agent: "writer", Input: "draft the intro"}, {Agent: "editor", Input: "tighten section 2"}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	if got := server.Calls()[0].Body["maxBranches"]; got != float64(2) {
		t.Fatalf("maxBranches sent: %v", got)
	}
}

func TestHTTPAgentIsToldWhetherItMayFanOut(t *testing.T) {
	cases := map[string]struct {
		change func(*agents.Request)
		want   any
	}{
		"an agent with parallel, by default 4": {change: func(*agents.Request) {}, want: float64(4)},
		"an agent without parallel":            {change: func(r *agents.Request) { r.Agent.Parallel = nil }},
		"a wrap-up turn":                       {change: func(r *agents.Request) { r.WrapUp = "The run used its tokens." }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewHTTPAgent(fakes.HTTPAnswer{Body: map[string]any{"output": "ok"}})
			defer server.Close()
			a, req := httpAgent(t, server)
			req.Agent.Parallel = &v1alpha1.Parallel{}
			tc.change(&req)
			if _, err := step(t, a, req, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := server.Calls()[0].Body["maxBranches"]; got != tc.want {
				t.Fatalf("maxBranches %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHTTPAgentParallelIsBounded(t *testing.T) {
	many := make([]map[string]any, 20)
	for i := range many {
		many[i] = map[string]any{"agent": "writer", "input": fmt.Sprint(i)}
	}
	cases := map[string]struct {
		parallel any
		wantErr  string
		check    func(t *testing.T, branches []workflow.Branch)
	}{
		"more branches than a fan-out may have fail the step": {
			parallel: many,
			wantErr:  "invalid answer: the answer asks for 20 branches, and a fan-out has at most 16",
		},
		"a parallel that is not a list of branches fails the step": {
			parallel: "writer",
			wantErr:  "the HTTP agent's answer is not the documented JSON",
		},
		"names and inputs are bounded, without the key": {
			parallel: []map[string]any{{"agent": strings.Repeat("w", 400), "input": "token tok-abcdef"}},
			check: func(t *testing.T, branches []workflow.Branch) {
				if len(branches) != 1 || len(branches[0].Agent) > 253 || branches[0].Input != "token [redacted]" {
					t.Fatalf("branches %+v", branches)
				}
			},
		},
		"an empty list is no fan-out": {
			parallel: []any{},
			check: func(t *testing.T, branches []workflow.Branch) {
				if len(branches) != 0 {
					t.Fatalf("branches %+v", branches)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewHTTPAgent(fakes.HTTPAnswer{Body: map[string]any{"output": "x", "tokens": 5, "parallel": tc.parallel}})
			defer server.Close()
			a, req := httpAgent(t, server)
			req.Agent.Parallel = &v1alpha1.Parallel{}
			res, err := step(t, a, req, 5*time.Second)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, res.Parallel)
		})
	}
}

func TestOpenAIFanOutIsOneFanOutStepOfTheRun(t *testing.T) {
	spec := MakeConfig("team", "ns").Mode(v1alpha1.ModeSwarm).Agents(
		MakeAgent("lead").Provider(v1alpha1.ProviderOpenAI).HandsOffTo("network-team", "billing").Parallel(2, v1alpha1.BudgetSplit, v1alpha1.Join{}),
		MakeAgent("network-team").Terminator(), MakeAgent("billing").Terminator()).Obj().Spec
	cases := map[string]struct {
		depth      int32 // how deep the run is nested as a branch
		wantFanOut bool
		wantReason string
	}{
		"a run that is no branch fans out": {wantFanOut: true},
		"a branch at limits.maxDepth is refused, saying why": {
			depth: 2, wantReason: "agent lead asked for branches at depth 2, and limits.maxDepth is 2",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := fakes.NewOpenAI()
			defer server.Close()
			a, req := parallelOpenAIAgent(t, server, nil)
			plan, errs := workflow.NewPlan(spec, nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if tc.depth > 0 {
				plan = plan.AsBranch("lead", tc.depth)
			}
			req.Agent = *plan.Agent("lead")
			req.Agent.Model = v1alpha1.ModelSpec{Provider: v1alpha1.ProviderOpenAI, Name: "m", Endpoint: server.BaseURL()}
			server.Reply(fakes.Reply{ToolCalls: []fakes.ToolCall{
				{Name: "transfer_to_billing", Args: `{"reason":"the invoice"}`}, {Name: "transfer_to_network_team", Args: `{"reason":"the VPN"}`},
			}})
			res, err := step(t, a, req, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
			st := workflow.Start(plan, v1alpha1.AgentRunStatus{}, "Ticket 7", "rev", now).Status
			st = workflow.Apply(plan, st, workflow.StepResult{Agent: "lead", Input: "Ticket 7", Result: res}, now).Status
			last := st.HandoffSequence[len(st.HandoffSequence)-1]
			if fanned := last.Outcome == v1alpha1.OutcomeFanOut; fanned != tc.wantFanOut || !strings.Contains(last.Reason, tc.wantReason) {
				t.Fatalf("step record %+v", last)
			}
			if tc.wantFanOut && (len(st.Branches) != 2 || st.Branches[0].Agent != "billing" || st.Branches[0].InputDigest != workflow.InputDigest("the invoice")) {
				t.Fatalf("branches %+v", st.Branches)
			}
		})
	}
}
