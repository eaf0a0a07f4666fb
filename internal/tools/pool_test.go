package tools_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/test/toolservers"
)

func sessions(s *sdkServer) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

func TestPoolSharesAClientPerServerURLAndHeaders(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("a", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("") })
	pool := newPool(t, tools.Options{})
	get := func(namespace string, server v1alpha1.ToolServer, headers map[string]string) tools.Client {
		c, err := pool.Client(ctxFor(t, time.Second), namespace, server, headers)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	server := mcpServer("sdk", s.URL)
	base := get("ns", server, map[string]string{"Authorization": "Bearer one-two-three"})
	longer := mcpServer("sdk", s.URL)
	longer.MCP.Timeout = v1alpha1.NewDuration(time.Minute)
	for _, tc := range []struct {
		name      string
		namespace string
		server    v1alpha1.ToolServer
		headers   map[string]string
		same      bool
	}{
		{"the same server and headers", "ns", mcpServer("sdk", s.URL), map[string]string{"Authorization": "Bearer one-two-three"}, true},
		{"other header values", "ns", server, map[string]string{"Authorization": "Bearer four-five-six"}, false},
		{"no headers", "ns", server, nil, false},
		{"another namespace", "other", server, map[string]string{"Authorization": "Bearer one-two-three"}, false},
		{"another name", "ns", mcpServer("sdk2", s.URL), map[string]string{"Authorization": "Bearer one-two-three"}, false},
		{"another spec", "ns", longer, map[string]string{"Authorization": "Bearer one-two-three"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(tc.namespace, tc.server, tc.headers) == base; got != tc.same {
				t.Fatalf("shared: %v, want %v", got, tc.same)
			}
		})
	}

	// Runs that share the client share its session.
	for range 5 {
		if _, err := get("ns", server, map[string]string{"Authorization": "Bearer one-two-three"}).Tools(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.count("initialize"); n != 1 {
		t.Fatalf("%d sessions opened, want 1", n)
	}
}

func TestPoolClosesIdleClients(t *testing.T) {
	s := newSDKServer(t, nil, nil)
	s.tool("a", nil, func(*mcp.CallToolRequest) *mcp.CallToolResult { return text("") })
	clk := clocktesting.NewFakeClock(time.Now())
	pool := newPool(t, tools.Options{Clock: clk})
	g := NewWithT(t)

	busy := client(t, pool, mcpServer("busy", s.URL), nil)
	idle := client(t, pool, mcpServer("idle", s.URL), nil)
	g.Expect(idle.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	clk.Step(9 * time.Minute)
	g.Expect(busy.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))
	g.Eventually(func() int { return sessions(s) }).WithTimeout(5 * time.Second).Should(Equal(2))

	clk.Step(2 * time.Minute)
	g.Eventually(func() int { return sessions(s) }).WithTimeout(5*time.Second).Should(Equal(1), "the session of the client unused for 11 minutes ends")
	_, err := idle.Tools(ctxFor(t, 10*time.Second))
	g.Expect(err).To(MatchError(tools.ErrClosed))
	g.Expect(busy.Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1), "a client used 2 minutes ago")

	// Asked again, the pool makes a new client.
	g.Expect(client(t, pool, mcpServer("idle", s.URL), nil).Tools(ctxFor(t, 10*time.Second))).To(HaveLen(1))

	pool.Close()
	_, err = busy.Tools(ctxFor(t, time.Second))
	g.Expect(errors.Is(err, tools.ErrClosed)).To(BeTrue(), "after Close: %v", err)
	g.Eventually(func() int { return sessions(s) }).WithTimeout(5 * time.Second).Should(BeZero())
	_, err = pool.Client(ctxFor(t, time.Second), "ns", mcpServer("busy", s.URL), nil)
	g.Expect(errors.Is(err, tools.ErrClosed)).To(BeTrue())
}

func TestPoolRefusesAServerOfNoKind(t *testing.T) {
	if _, err := newPool(t, tools.Options{}).Client(ctxFor(t, time.Second), "ns", v1alpha1.ToolServer{Name: "empty"}, nil); err == nil {
		t.Fatal("a tool server with neither mcp nor http was accepted")
	}
}

func TestPoolChecksHeaders(t *testing.T) {
	tool := toolservers.NewCountingTool()
	defer tool.Close()
	pool := newPool(t, tools.Options{})
	c := client(t, pool, httpTool("api", tool.URL), map[string]string{"Authorization": "Bearer from-echo-0123\n"})
	call(t, c, "api", `{}`, "k")
	if got := tool.Calls()[0].Header.Get("Authorization"); got != "Bearer from-echo-0123" {
		t.Fatalf("Authorization: %q", got)
	}
	for name, headers := range map[string]map[string]string{
		"a key that is no header name": {"api key": "secret-value-1"},
		"a value with a line break":    {"X-Key": "secret-value-1\nX-Other: 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Client(ctxFor(t, time.Second), "ns", httpTool("api", tool.URL), headers)
			if err == nil || strings.Contains(err.Error(), "secret-value") {
				t.Fatalf("error: %v", err)
			}
		})
	}
}
