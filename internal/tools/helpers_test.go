package tools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/test/toolservers"
)

// ctxFor is a context that ends with the test, or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newPool is a pool whose HTTP client retries as the operator's does.
func newPool(t *testing.T, opts tools.Options) *tools.Pool {
	t.Helper()
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: agents.NewRetryTransport(nil, nil)}
	}
	opts.Version = "test"
	p := tools.NewPool(opts)
	t.Cleanup(p.Close)
	return p
}

// start starts a real server, or the test fails; the server stops when the test ends, and a
// failed test shows its output.
func start(t *testing.T, run func(context.Context) (*toolservers.Server, error)) *toolservers.Server {
	t.Helper()
	s, err := run(ctxFor(t, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output (%s):\n%s", s.URL, s.Log, s.LogTail(8<<10))
		}
		s.Stop()
	})
	return s
}

// mcpServer is a config's MCP tool server.
func mcpServer(name, url string) v1alpha1.ToolServer {
	return v1alpha1.ToolServer{Name: name, MCP: &v1alpha1.MCPServer{URL: url}}
}

// httpTool is a config's HTTP tool.
func httpTool(name, url string) v1alpha1.ToolServer {
	return v1alpha1.ToolServer{Name: name, HTTP: &v1alpha1.HTTPTool{URL: url}}
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// client is the pool's client of a server, or the test fails.
func client(t *testing.T, p *tools.Pool, server v1alpha1.ToolServer, headers map[string]string) tools.Client {
	t.Helper()
	c, err := p.Client(ctxFor(t, 10*time.Second), "ns", server, headers)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// call makes a call, or the test fails.
func call(t *testing.T, c tools.Client, tool, args, key string) tools.Result {
	t.Helper()
	res, err := c.Call(ctxFor(t, 60*time.Second), tools.Call{Tool: tool, Arguments: json.RawMessage(args), IdempotencyKey: key})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

// names are the tools' names.
func names(ts []tools.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// sdkServer is an MCP server built with the same SDK, served over streamable HTTP in process:
// for what the reference servers cannot show (the _meta a call carries, a tool list that
// changes, request headers).
type sdkServer struct {
	*mcp.Server
	URL string

	mu      sync.Mutex
	headers []http.Header
	metas   []map[string]any
	methods []string
}

// newSDKServer serves a new SDK server; wrap, when set, stands in front of its handler.
func newSDKServer(t *testing.T, opts *mcp.ServerOptions, wrap func(http.Handler) http.Handler) *sdkServer {
	t.Helper()
	s := &sdkServer{Server: mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, opts)}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			s.mu.Lock()
			s.methods = append(s.methods, method)
			s.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server }, nil)
	record := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		record.ServeHTTP(w, r)
	})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/mcp"
	return s
}

// tool adds a tool whose handler records the call's _meta and answers res.
func (s *sdkServer) tool(name string, output any, answer func(*mcp.CallToolRequest) *mcp.CallToolResult) {
	s.AddTool(&mcp.Tool{Name: name, Description: name + " tool", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: output},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.mu.Lock()
			s.metas = append(s.metas, req.Params.Meta)
			s.mu.Unlock()
			return answer(req), nil
		})
}

// count is how many requests of a method the server received.
func (s *sdkServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (s *sdkServer) lastMeta() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.metas) == 0 {
		return nil
	}
	return s.metas[len(s.metas)-1]
}

func (s *sdkServer) sawHeader(name, value string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.headers {
		if h.Get(name) == value {
			return true
		}
	}
	return false
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
