package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/providers"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
	"github.com/baton-dev/baton/test/fakes"
)

// box is a Toolbox that keeps its records in memory: the loop's partner, as the controller's
// Toolbox is, without a transcript. Calls of "gated" wait at a gate; calls of "stop" trip.
type box struct {
	progress agents.Progress
	turns    []agents.Turn
	calls    []workflow.ToolCall
	limit    int32
	made     int32
	// unlisted makes Offered list nothing, as when the servers cannot be reached.
	unlisted bool
	// together, when set, holds each call until that many are in flight.
	together *sync.WaitGroup
}

func (b *box) Offered(context.Context) ([]agents.OfferedTool, error) {
	if b.unlisted {
		return nil, nil
	}
	return []agents.OfferedTool{{Server: "s", Tool: "echo", Name: "s__echo"}, {Server: "s", Tool: "gated", Name: "s__gated"}}, nil
}

func (b *box) Progress() agents.Progress { return b.progress }

func (b *box) Asked(_ context.Context, t *agents.Turn) error {
	t.Number = int32(len(b.turns) + 1)
	for i := range t.Calls {
		t.Calls[i].Index = int32(len(b.calls) + i + 1)
	}
	b.turns = append(b.turns, *t)
	b.calls = append(b.calls, t.Calls...)
	return nil
}

func (b *box) Prepare(_ context.Context, c workflow.ToolCall) (agents.Prepared, error) {
	switch {
	case c.Tool == "gated":
		return agents.Prepared{}, &workflow.Held{Gate: "tool/s/gated", Call: c}
	case c.Tool == "stop":
		return agents.Prepared{}, &workflow.ToolTrip{Reason: v1alpha1.ReasonToolCallLimitExceeded, Message: "limit"}
	case b.limit > 0 && b.made >= b.limit:
		return agents.Prepared{Outcome: workflow.ToolOutcome{IsError: true, Content: "not made"}}, nil
	}
	b.made++
	return agents.Prepared{Send: func(ctx context.Context) (workflow.ToolOutcome, error) {
		if b.together != nil {
			// Every call of the turn must be in flight at once for any to answer.
			b.together.Done()
			waited := make(chan struct{})
			go func() { b.together.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-ctx.Done():
				return workflow.ToolOutcome{}, ctx.Err()
			}
		}
		return workflow.ToolOutcome{Made: true, Content: "echo " + string(c.Arguments)}, nil
	}}, nil
}

// model answers with the calls of its script, one turn per request, then with final; it
// remembers what it was given each time.
type model struct {
	turns [][]workflow.ToolCall
	asked [][]agents.Exchange
	bare  []bool
}

func (m *model) ask(_ context.Context, ex []agents.Exchange, offered []agents.OfferedTool) (*agents.Reply, error) {
	m.asked = append(m.asked, ex)
	m.bare = append(m.bare, offered == nil)
	if n := len(m.asked) - 1; n < len(m.turns) && offered != nil {
		return &agents.Reply{Text: fmt.Sprintf("turn %d", n+1), Calls: m.turns[n], Tokens: 10}, nil
	}
	return &agents.Reply{Final: workflow.Result{Output: "answer", Handoff: "next"}, Tokens: 7}, nil
}

func call(tool, args string) workflow.ToolCall {
	return workflow.ToolCall{ID: tool + args, Server: "s", Tool: tool, Arguments: json.RawMessage(args)}
}

func TestTheToolLoopGoesOnUntilTheModelAnswers(t *testing.T) {
	b := &box{}
	m := &model{turns: [][]workflow.ToolCall{{call("echo", `{"a":1}`), call("echo", `{"a":2}`)}, {call("echo", `{"a":3}`)}}}
	res, err := agents.Converse(context.Background(), &agents.Request{Tools: b}, m.ask)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "answer" || res.Handoff != "next" || res.Tokens != 27 || res.ToolCalls != 3 {
		t.Fatalf("result %+v", res)
	}
	// Each request carries every exchange so far, with the outcomes in the calls' order.
	last := m.asked[2]
	if len(m.asked) != 3 || len(last) != 2 || last[0].Outcomes[1].Content != `echo {"a":2}` || last[1].Turn.Calls[0].Index != 3 {
		t.Fatalf("requests %+v", m.asked)
	}
}

func TestAfterMaxToolCallsTheModelIsAskedWithoutTools(t *testing.T) {
	b := &box{limit: 2}
	m := &model{turns: [][]workflow.ToolCall{{call("echo", `1`), call("echo", `2`), call("echo", `3`)}, {call("echo", `4`)}}}
	res, err := agents.Converse(context.Background(), &agents.Request{Tools: b, Agent: v1alpha1.Agent{MaxToolCalls: ptr.To[int32](2)}}, m.ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.asked) != 2 || !m.bare[1] || res.ToolCalls != 2 || res.Output != "answer" {
		t.Fatalf("asked %d times, bare %v, result %+v", len(m.asked), m.bare, res)
	}
	if got := m.asked[1][0].Outcomes[2]; !got.IsError || got.Made {
		t.Fatalf("the call past the limit: %+v", got)
	}
}

func TestAHeldCallStopsTheStepAndItGoesOnFromItsRecords(t *testing.T) {
	b := &box{}
	m := &model{turns: [][]workflow.ToolCall{{call("echo", `1`)}, {call("gated", `2`)}}}
	res, err := agents.Converse(context.Background(), &agents.Request{Tools: b}, m.ask)
	if err != nil || res.Held == nil || res.Held.Call.Index != 2 || res.Tokens != 20 || res.ToolCalls != 1 {
		t.Fatalf("held %+v, %v", res, err)
	}
	// The step goes on: its turns come from the records, and the model is not asked them again.
	approved := &box{progress: agents.Progress{CountedTokens: 20, CountedCalls: 1, Exchanges: []agents.Exchange{
		{Turn: b.turns[0], Outcomes: []workflow.ToolOutcome{{Made: true, Content: "echo 1"}}},
		{Turn: agents.Turn{Number: 2, Tokens: 10, Calls: []workflow.ToolCall{{Index: 2, Server: "s", Tool: "echo", Arguments: json.RawMessage(`2`)}}}},
	}}}
	again := &model{}
	res, err = agents.Converse(context.Background(), &agents.Request{Tools: approved}, again.ask)
	if err != nil || len(again.asked) != 1 || res.Output != "answer" {
		t.Fatalf("resumed: %+v %v, asked %d times", res, err, len(again.asked))
	}
	if res.Tokens != 27 || res.CountedTokens != 20 || res.ToolCalls != 2 || res.CountedToolCalls != 1 || again.asked[0][1].Outcomes[0].Content != "echo 2" {
		t.Fatalf("resumed step counts tokens %d calls %d counted %d; asked %+v", res.Tokens, res.ToolCalls, res.CountedToolCalls, again.asked[0])
	}
}

func TestAGuardStopsTheStep(t *testing.T) {
	m := &model{turns: [][]workflow.ToolCall{{call("echo", `1`), call("stop", `2`), call("echo", `3`)}}}
	res, err := agents.Converse(context.Background(), &agents.Request{Tools: &box{}}, m.ask)
	if err != nil || res.Trip == nil || res.ToolCalls != 1 || len(m.asked) != 1 {
		t.Fatalf("result %+v %v", res, err)
	}
}

func TestAStepWithoutToolsAsksOnce(t *testing.T) {
	m := &model{turns: [][]workflow.ToolCall{{call("echo", `1`)}}}
	res, err := agents.Converse(context.Background(), &agents.Request{}, m.ask)
	if err != nil || len(m.asked) != 1 || !m.bare[0] || res.Tokens != 7 {
		t.Fatalf("result %+v %v asked %d", res, err, len(m.asked))
	}
}

func TestFunctionNames(t *testing.T) {
	long := "a-very-long-tool-name.with.dots.and-more-and-more-and-more-and-more-and-more"
	for _, tc := range []struct{ server, tool, want string }{
		{"memory", "search_nodes", "memory__search_nodes"},
		{"crm", "lookup.v2", "crm__lookup_v2"},
	} {
		if got := agents.FunctionName(tc.server, tc.tool); got != tc.want {
			t.Errorf("FunctionName(%s, %s) = %s, want %s", tc.server, tc.tool, got, tc.want)
		}
	}
	a, b := agents.FunctionName("memory", long), agents.FunctionName("memory", long+"x")
	if len(a) > 64 || a == b {
		t.Fatalf("long names %s %s", a, b)
	}
}

// The OpenAI provider's tool loop, against a server speaking the chat completions wire format:
// the agent's tools are offered beside its handoffs, each call's result goes back with its
// call's id, and the model's handoff after the results ends the step.
func TestOpenAIToolLoop(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	server.Reply(
		fakes.Reply{Content: "Looking it up.", ToolCalls: []fakes.ToolCall{{Name: "s__echo", Args: `{"q":"vpn"}`}, {Name: "s__echo", Args: `{"q":"dns"}`}}, Tokens: 30},
		fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "transfer_to_network_team", Args: `{"reason":"VPN issue"}`}}, Tokens: 12},
	)
	a, req := openAIAgent(t, server)
	req.Tools = &box{}
	res, err := step(t, a, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Handoff != "network-team" || res.Reason != "VPN issue" || res.Tokens != 42 || res.ToolCalls != 2 {
		t.Fatalf("result %+v", res)
	}
	reqs := server.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if offered := reqs[0].ToolNames(); !slices.Contains(offered, "s__echo") || !slices.Contains(offered, "transfer_to_network_team") {
		t.Fatalf("offered %v", offered)
	}
	results := reqs[1].ToolResults()
	var asked []fakes.ChatMsgCall
	for _, m := range reqs[1].Messages {
		asked = append(asked, m.ToolCalls...)
	}
	if len(results) != 2 || len(asked) != 2 || results[0].ToolCallID != asked[0].ID || results[1].ToolCallID != asked[1].ID ||
		results[0].Content != `echo {"q":"vpn"}` || results[1].Content != `echo {"q":"dns"}` {
		t.Fatalf("results %+v for calls %+v", results, asked)
	}
}

// After maxToolCalls the model is asked once more, without the agent's tools, for its answer.
func TestOpenAIIsAskedForAnAnswerAfterMaxToolCalls(t *testing.T) {
	server := fakes.NewOpenAI()
	defer server.Close()
	server.Reply(
		fakes.Reply{ToolCalls: []fakes.ToolCall{{Name: "s__echo", Args: `{}`}}, Tokens: 5},
		fakes.Reply{Content: "Here is what I found.", Tokens: 5},
	)
	a, req := openAIAgent(t, server)
	req.Agent.MaxToolCalls = ptr.To[int32](1)
	req.Tools = &box{}
	res, err := step(t, a, req, 10*time.Second)
	if err != nil || res.Output != "Here is what I found." || res.ToolCalls != 1 {
		t.Fatalf("result %+v %v", res, err)
	}
	last := server.Requests()[1]
	if slices.Contains(last.ToolNames(), "s__echo") || !strings.Contains(last.Messages[len(last.Messages)-1].Content, "Answer now") {
		t.Fatalf("the last request offered %v and ended with %+v", last.ToolNames(), last.Messages[len(last.Messages)-1])
	}
}

// A Scripted agent makes its calls even when its servers listed no tool: their errors are its
// results, and its answer follows.
func TestScriptedCallsAreMadeForReal(t *testing.T) {
	a, err := providers.New(agents.Dependencies{}).For(v1alpha1.ProviderScripted)
	if err != nil {
		t.Fatal(err)
	}
	turn := v1alpha1.ScriptTurn{Output: "filed", Handoff: "b", Tokens: 9, ToolCalls: []v1alpha1.ScriptToolCall{
		{Server: "s", Tool: "echo", Arguments: &apiextensionsv1.JSON{Raw: []byte(`{"n":1}`)}}, {Server: "s", Tool: "echo"}}}
	for _, b := range []*box{{}, {unlisted: true}} {
		res, err := a.Step(context.Background(), &agents.Request{Agent: v1alpha1.Agent{Name: "a", Script: []v1alpha1.ScriptTurn{turn}}, Tools: b})
		if err != nil || res.Output != "filed" || res.Handoff != "b" || res.Tokens != 9 || res.ToolCalls != 2 {
			t.Fatalf("unlisted %t: %+v %v", b.unlisted, res, err)
		}
		if len(b.calls) != 2 || string(b.calls[0].Arguments) != `{"n":1}` || string(b.calls[1].Arguments) != `{}` {
			t.Fatalf("calls %+v", b.calls)
		}
	}
}

// The calls of one answer are sent together, and their results come back in the calls' order.
func TestTheCallsOfOneTurnAreSentTogether(t *testing.T) {
	together := &sync.WaitGroup{}
	together.Add(3)
	b := &box{together: together}
	m := &model{turns: [][]workflow.ToolCall{{call("echo", `1`), call("echo", `2`), call("echo", `3`)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := agents.Converse(ctx, &agents.Request{Tools: b}, m.ask)
	if err != nil || res.ToolCalls != 3 {
		t.Fatalf("the calls were not all in flight at once: %+v %v", res, err)
	}
	for i, o := range m.asked[1][0].Outcomes {
		if want := fmt.Sprintf("echo %d", i+1); o.Content != want {
			t.Fatalf("outcome %d is %q, want %q", i, o.Content, want)
		}
	}
}
