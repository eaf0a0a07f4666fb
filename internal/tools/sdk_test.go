package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/tools"
)

// What the reference servers cannot show, against a server built with the same SDK.

var weatherSchema = json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}`)

func TestTheIdempotencyKeyTravelsInMeta(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("charge", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("charged") })
	c := client(t, newPool(t, tools.Options{}), mcpServer("billing", s.URL), nil)
	if got := call(t, c, "charge", `{"cents":100}`, "run-uid/4/2"); got.Content != "charged" {
		t.Fatalf("result: %+v", got)
	}
	if key := s.lastMeta()[tools.IdempotencyMetaKey]; key != "run-uid/4/2" {
		t.Fatalf("_meta: %v", s.lastMeta())
	}
}

func TestAJSONRPCErrorIsAnError(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("known", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("ok") })
	c := client(t, newPool(t, tools.Options{}), mcpServer("sdk", s.URL), nil)
	_, err := c.Call(ctxFor(t, 30*time.Second), tools.Call{Tool: "nope", Arguments: json.RawMessage(`{}`), IdempotencyKey: "k"})
	if err == nil || !contains(err.Error(), "sdk", `unknown tool "nope"`) {
		t.Fatalf("error: %v", err)
	}
}

func TestStructuredResultsAreCheckedAgainstTheOutputSchema(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("good", weatherSchema, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"temperature": 21.5}}
	})
	s.tool("bad", weatherSchema, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"temperature": "warm"}}
	})
	s.tool("textual", weatherSchema, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("21.5 degrees") })
	s.tool("unchecked", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"temperature": "warm"}}
	})
	c := client(t, newPool(t, tools.Options{}), mcpServer("weather", s.URL), nil)
	if got := call(t, c, "good", `{}`, "k1"); got.IsError || got.Content != `{"temperature":21.5}` || string(got.Structured) != got.Content {
		t.Fatalf("a matching result: %+v", got)
	}
	if got := call(t, c, "bad", `{}`, "k2"); !got.IsError || got.Structured != nil || !contains(got.Content, "output schema", "/temperature", "want number") {
		t.Fatalf("a result that does not match: %+v", got)
	}
	if got := call(t, c, "textual", `{}`, "k3"); !got.IsError || !contains(got.Content, "no structured result", "21.5 degrees") {
		t.Fatalf("a text result where a structured one is due: %+v", got)
	}
	if got := call(t, c, "unchecked", `{}`, "k4"); got.IsError || got.Content != `{"temperature":"warm"}` {
		t.Fatalf("a tool without output schema: %+v", got)
	}
}

func TestToolListRefreshesWhenTheServerSaysItChanged(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("first", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("1") })
	c := client(t, newPool(t, tools.Options{ListTTL: time.Hour}), mcpServer("sdk", s.URL), nil)
	g := NewWithT(t)
	g.Expect(c.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	lists := s.count("tools/list")
	g.Expect(c.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	g.Expect(s.count("tools/list")).To(Equal(lists), "a fresh list is not asked again")

	s.tool("second", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("2") })
	g.Eventually(func() ([]string, error) {
		listed, err := c.Tools(ctxFor(t, 10*time.Second))
		return names(listed), err
	}).WithTimeout(10 * time.Second).Should(ConsistOf("first", "second"))
	g.Expect(call(t, c, "second", `{}`, "k").Content).To(Equal("2"))
}

func TestToolListExpires(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("only", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("1") })
	clk := clocktesting.NewFakeClock(time.Now())
	c := client(t, newPool(t, tools.Options{ListTTL: 5 * time.Minute, Clock: clk}), mcpServer("sdk", s.URL), nil)
	g := NewWithT(t)
	g.Expect(c.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	lists := s.count("tools/list")
	clk.Step(4 * time.Minute)
	g.Expect(c.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	g.Expect(s.count("tools/list")).To(Equal(lists))
	clk.Step(2 * time.Minute)
	g.Expect(c.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	g.Expect(s.count("tools/list")).To(Equal(lists+1), "a list past its TTL is asked again")
}

func TestToolListFollowsPages(t *testing.T) {
	s := newSDKServer(t, &mcp.ServerOptions{PageSize: 2}, nil)
	for i := range 7 {
		s.tool(fmt.Sprintf("tool-%d", i), nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("") })
	}
	c := client(t, newPool(t, tools.Options{}), mcpServer("sdk", s.URL), nil)
	listed, err := c.Tools(ctxFor(t, 10*time.Second))
	if err != nil || len(listed) != 7 {
		t.Fatalf("listed %v (%v)", names(listed), err)
	}
	if n := s.count("tools/list"); n != 4 {
		t.Fatalf("%d pages asked for, want 4", n)
	}
}

func TestLargeResultsAreBounded(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("dump", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return text(strings.Repeat("é", tools.MaxResultBytes))
	})
	s.tool("dump-json", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"blob": strings.Repeat("x", tools.MaxResultBytes)}}
	})
	c := client(t, newPool(t, tools.Options{}), mcpServer("sdk", s.URL), nil)
	for _, tool := range []string{"dump", "dump-json"} {
		got := call(t, c, tool, `{}`, "k")
		if len(got.Content) > tools.MaxResultBytes || !strings.Contains(got.Content, "[truncated: ") || got.Structured != nil || got.IsError {
			t.Fatalf("%s: %d bytes, structured %d bytes, ends %q", tool, len(got.Content), len(got.Structured), got.Content[len(got.Content)-40:])
		}
	}
}

func TestACallIsBoundedByTheServersTimeout(t *testing.T) {
	t.Parallel() // each has its own server, and waits on it
	s := newSDKServer(t, nil, nil)
	release := make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return text("late"), nil
		})
	server := mcpServer("sdk", s.URL)
	server.MCP.Timeout = v1alpha1.NewDuration(300 * time.Millisecond)
	c := client(t, newPool(t, tools.Options{}), server, nil)
	t.Cleanup(func() { close(release) }) // before the pool closes: its session's end waits for the call
	if _, err := c.Tools(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Call(ctxFor(t, 10*time.Second), tools.Call{Tool: "slow", IdempotencyKey: "k"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	// The client is still good for the next call.
	if _, err := c.Tools(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

const secretToken = "Bearer sk-live-0123456789abcdef"

// requireAuth refuses requests without the secret headers with a JSON-RPC error that quotes
// the Authorization header it got, as careless servers do.
func requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == secretToken && r.Header.Get("X-Tenant") == "acme-corp" {
			next.ServeHTTP(w, r)
			return
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": -32001, "message": "bad credentials: " + r.Header.Get("Authorization")}})
	})
}

func TestSecretHeadersReachTheServerAndNothingElse(t *testing.T) {
	s := newSDKServer(t, nil, requireAuth)
	s.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			auth := req.Extra.Header.Get("Authorization")
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "you sent " + auth}},
				StructuredContent: map[string]any{"token": strings.TrimPrefix(auth, "Bearer "), "header": auth},
			}, nil
		})
	s.AddTool(&mcp.Tool{Name: "leak", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "denied for " + req.Extra.Header.Get("Authorization")}}}, nil
		})
	headers := map[string]string{"Authorization": secretToken, "X-Tenant": "acme-corp"}
	pool := newPool(t, tools.Options{})
	c := client(t, pool, mcpServer("secured", s.URL), headers)

	got := call(t, c, "whoami", `{}`, "k1")
	if !s.sawHeader("Authorization", secretToken) || !s.sawHeader("X-Tenant", "acme-corp") {
		t.Fatal("the Secret's headers did not reach the server")
	}
	if strings.Contains(got.Content, "sk-live") || strings.Contains(string(got.Structured), "sk-live") ||
		!json.Valid(got.Structured) || !strings.Contains(got.Content, "[redacted]") {
		t.Fatalf("the result quotes the secret: %+v", got)
	}
	if got := call(t, c, "leak", `{}`, "k2"); !got.IsError || strings.Contains(got.Content, "sk-live") {
		t.Fatalf("an error result quotes the secret: %+v", got)
	}

	// A server that refuses the credentials and quotes them back: the error does not.
	wrong := map[string]string{"Authorization": "Bearer sk-live-wrong-credential-42", "X-Tenant": "acme-corp"}
	_, err := client(t, pool, mcpServer("secured", s.URL), wrong).Tools(ctxFor(t, 30*time.Second))
	if err == nil || strings.Contains(err.Error(), "sk-live-wrong") || !contains(err.Error(), "bad credentials: [redacted]") {
		t.Fatalf("error: %v", err)
	}
}

func TestOnlyTheServersOwnToolsAreListed(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("a", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("") })
	c := client(t, newPool(t, tools.Options{}), mcpServer("one", s.URL), nil)
	listed, err := c.Tools(ctxFor(t, 10*time.Second))
	if err != nil || !slices.Equal(names(listed), []string{"a"}) || listed[0].Server != "one" ||
		listed[0].Description != "a tool" || string(listed[0].InputSchema) != `{"type":"object"}` {
		t.Fatalf("listed %+v (%v)", listed, err)
	}
}
