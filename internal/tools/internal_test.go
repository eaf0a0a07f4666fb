package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/test/toolservers"
)

func TestPoolKeysHoldNoHeaderValues(t *testing.T) {
	server := v1alpha1.ToolServer{Name: "memory", MCP: &v1alpha1.MCPServer{URL: "http://memory/mcp"}}
	key, err := keyOf("ns", server, map[string]string{"Authorization": "Bearer hunter2-hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%+v %#v", key, key); strings.Contains(s, "hunter2") {
		t.Fatalf("the key shows a header value: %s", s)
	}
	// Header sets that would read the same if run together do not share a key.
	a, _ := keyOf("ns", server, map[string]string{"A": "bc", "D": "e"})
	b, _ := keyOf("ns", server, map[string]string{"A": "b", "CD": "e"})
	if a == b {
		t.Fatal("two header sets share a key")
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor(map[string]string{"Authorization": "Bearer tok-0123456789", "X-Key": `k"ey\value`, "X-Tenant": "acme"})
	for _, tc := range []struct{ name, in, want string }{
		{"the whole value", "got Bearer tok-0123456789!", "got [redacted]!"},
		{"the credential alone", "token tok-0123456789 is expired", "token [redacted] is expired"},
		{"short values are words", "tenant acme", "tenant acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.text(tc.in); got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
	doc := r.json(json.RawMessage(`{"auth":"Bearer tok-0123456789","tok-0123456789":1,"n":[{"k":"k\"ey\\value"}],"tenant":"acme"}`))
	if want := `{"[redacted]":1,"auth":"[redacted]","n":[{"k":"[redacted]"}],"tenant":"acme"}`; string(doc) != want {
		t.Fatalf("%s, want %s", doc, want)
	}
	err := r.err(fmt.Errorf("wrapped: %w", context.DeadlineExceeded))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a redacted error lost its cause")
	}
	if err := r.err(errors.New("refused Bearer tok-0123456789")); err.Error() != "refused [redacted]" {
		t.Fatalf("error: %v", err)
	}
}

func TestResultContents(t *testing.T) {
	size := int64(2048)
	for _, tc := range []struct {
		name string
		res  *mcp.CallToolResult
		want Result
	}{
		{"texts joined", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}, &mcp.TextContent{Text: "two"}}},
			Result{Content: "one\ntwo"}},
		{"other contents described", &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 68)},
			&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)},
			&mcp.ResourceLink{URI: "file:///report.pdf", Name: "report", MIMEType: "application/pdf", Size: &size},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://notes", MIMEType: "text/plain", Text: "hello"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://blob", Blob: make([]byte, 3)}},
		}}, Result{Content: "[image: image/png, 68 bytes]\n[audio: audio/wav, 10 bytes]\n" +
			"[resource link: report file:///report.pdf (application/pdf, 2048 bytes)]\n" +
			"[embedded resource: mem://notes (text/plain, 5 bytes of text)]\n[embedded resource: mem://blob (type unknown, 3 bytes)]"}},
		{"an error result keeps its structured content", &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"code": 7},
			Content: []mcp.Content{&mcp.TextContent{Text: "failed"}}},
			Result{IsError: true, Content: `{"code":7}`, Structured: json.RawMessage(`{"code":7}`)}},
		{"no result", nil, Result{IsError: true, Content: "the server answered no result"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resultOf(tc.res, nil, nil)); diff != "" {
				t.Fatalf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// The output schema server-everything declares (draft-07, with its $schema) compiles: its
// structured results are checked, not waved through.
func TestEverythingsOutputSchemaCompiles(t *testing.T) {
	t.Parallel() // it waits on the server
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := Everything(t)
	pool := NewPool(Options{})
	defer pool.Close()
	c, err := pool.Client(ctx, "ns", v1alpha1.ToolServer{Name: "everything", MCP: &v1alpha1.MCPServer{URL: srv.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.(pooled).e.client.(*mcpClient).tools(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sch, ok := l.schemas["get-structured-content"]; !ok || sch == nil {
		t.Fatalf("get-structured-content's output schema: %v, %v", sch, ok)
	}
	if sch, ok := l.schemas["echo"]; !ok || sch != nil {
		t.Fatalf("echo declares no output schema: %v, %v", sch, ok)
	}
	if problems, ok := l.schemas["get-structured-content"].check(json.RawMessage(`{"temperature":"hot","conditions":"x","humidity":1}`)); ok || !strings.Contains(problems, "/temperature") {
		t.Fatalf("a result that does not match: %q, %v", problems, ok)
	}
}

// everything is the one server-everything of the tests that only call it: started by the first
// that needs it, stopped when they have all run (TestMain). A test that restarts its server has
// one of its own.
var everything struct {
	once sync.Once
	srv  *toolservers.Server
	err  error
}

// Everything is the tests' shared server-everything.
func Everything(t *testing.T) *toolservers.Server {
	t.Helper()
	everything.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		everything.srv, everything.err = toolservers.StartEverything(ctx)
	})
	if everything.err != nil {
		t.Fatal(everything.err)
	}
	return everything.srv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if everything.srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "server-everything output (%s):\n%s\n", everything.srv.Log, everything.srv.LogTail(8<<10))
		}
		everything.srv.Stop()
	}
	os.Exit(code)
}
