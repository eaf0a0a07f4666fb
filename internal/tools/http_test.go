package tools_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/test/toolservers"
)

func TestHTTPToolIsOneTool(t *testing.T) {
	named := httpTool("crm", "http://crm.invalid/lookup")
	named.HTTP.Tool, named.HTTP.Description = "lookup_customer", "Looks a customer up by email"
	named.HTTP.InputSchema = rawJSON(`{"type":"object","properties":{"email":{"type":"string"}},"required":["email"]}`)
	pool := newPool(t, tools.Options{})
	for _, tc := range []struct {
		name   string
		server v1alpha1.ToolServer
		want   tools.Tool
	}{
		{"defaults", httpTool("crm", "http://crm.invalid/lookup"),
			tools.Tool{Server: "crm", Name: "crm", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		{"as configured", named, tools.Tool{Server: "crm", Name: "lookup_customer", Description: "Looks a customer up by email",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"email":{"type":"string"}},"required":["email"]}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed, err := client(t, pool, tc.server, nil).Tools(ctxFor(t, time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]tools.Tool{tc.want}, listed); diff != "" {
				t.Fatalf("tools (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPToolCall(t *testing.T) {
	tool := toolservers.NewCountingTool()
	defer tool.Close()
	c := client(t, newPool(t, tools.Options{}), httpTool("counter", tool.URL), map[string]string{"Authorization": secretToken})
	got := call(t, c, "counter", `{"email": "ada@example.com"}`, "run-uid/3/1")
	if got.IsError || !json.Valid(got.Structured) || got.Content != string(got.Structured) || strings.Contains(got.Content, "\n") {
		t.Fatalf("result: %+v", got)
	}
	var answer struct {
		OK             bool            `json:"ok"`
		IdempotencyKey string          `json:"idempotencyKey"`
		Arguments      json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(got.Structured, &answer); err != nil || !answer.OK || answer.IdempotencyKey != "run-uid/3/1" {
		t.Fatalf("answer: %s (%v)", got.Structured, err)
	}
	calls := tool.Calls()
	if len(calls) != 1 || string(calls[0].Arguments) != `{"email": "ada@example.com"}` {
		t.Fatalf("calls: %+v", calls)
	}
	h := calls[0].Header
	if h.Get("Idempotency-Key") != "run-uid/3/1" || h.Get("Authorization") != secretToken ||
		h.Get("Content-Type") != "application/json" || h.Get("Accept") != "application/json" {
		t.Fatalf("headers: %v", h)
	}
	call(t, c, "counter", `{}`, "run-uid/3/2")
	call(t, c, "counter", `{}`, "run-uid/3/2")
	if tool.Repeated() != 1 {
		t.Fatalf("repeated keys: %d", tool.Repeated())
	}
	if _, err := c.Call(ctxFor(t, time.Second), tools.Call{Tool: "other"}); err == nil {
		t.Fatal("a call of another tool was made")
	}
}

// answering serves one answer, counting the requests.
func answering(t *testing.T, status int, contentType, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.ReplaceAll(body, "$AUTH", r.Header.Get("Authorization")))
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func TestHTTPToolAnswers(t *testing.T) {
	t.Parallel() // each has its own server, and waits on it
	schema := `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
	for _, tc := range []struct {
		name                string
		status              int
		contentType, body   string
		outputSchema        string
		want                tools.Result
		wantCalls           int32
		wantErrorContaining string
	}{
		{name: "JSON", status: 200, contentType: "application/json", body: "{\n  \"id\": 7\n}",
			want: tools.Result{Content: `{"id":7}`, Structured: json.RawMessage(`{"id":7}`)}, wantCalls: 1},
		{name: "JSON matching the output schema", status: 200, contentType: "application/problem+json", body: `{"id": 7}`, outputSchema: schema,
			want: tools.Result{Content: `{"id":7}`, Structured: json.RawMessage(`{"id":7}`)}, wantCalls: 1},
		{name: "JSON that does not match the output schema", status: 200, contentType: "application/json", body: `{"id": "seven"}`, outputSchema: schema,
			want: tools.Result{IsError: true, Content: "the tool's result does not match its output schema: - at '/id': got string, want integer"}, wantCalls: 1},
		{name: "text", status: 200, contentType: "text/plain", body: "queued as ticket 42",
			want: tools.Result{Content: "queued as ticket 42"}, wantCalls: 1},
		{name: "text where JSON is due", status: 200, contentType: "text/plain", body: "42", outputSchema: schema,
			want: tools.Result{IsError: true, Content: "the tool declares an output schema but its answer is not JSON: 42"}, wantCalls: 1},
		{name: "a client error is not retried", status: 404, contentType: "application/json", body: `{"error":"no such customer"}`,
			want: tools.Result{IsError: true, Content: `HTTP 404 Not Found: {"error":"no such customer"}`}, wantCalls: 1},
		{name: "a server error after the retries", status: 500, contentType: "text/plain", body: "database is down",
			want: tools.Result{IsError: true, Content: "HTTP 500 Internal Server Error: database is down"}, wantCalls: 3},
		{name: "an error quoting the credentials", status: 403, contentType: "text/plain", body: "forbidden for $AUTH",
			want: tools.Result{IsError: true, Content: "HTTP 403 Forbidden: forbidden for [redacted]"}, wantCalls: 1},
		{name: "an answer over 8 MiB", status: 200, contentType: "application/json", body: `"` + strings.Repeat("x", 8<<20) + `"`,
			wantErrorContaining: "larger than 8 MiB", wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, calls := answering(t, tc.status, tc.contentType, tc.body)
			server := httpTool("api", s.URL)
			if tc.outputSchema != "" {
				server.HTTP.OutputSchema = rawJSON(tc.outputSchema)
			}
			c := client(t, newPool(t, tools.Options{}), server, map[string]string{"Authorization": secretToken})
			got, err := c.Call(ctxFor(t, 30*time.Second), tools.Call{Tool: "api", Arguments: json.RawMessage(`{}`), IdempotencyKey: "k"})
			switch {
			case tc.wantErrorContaining != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErrorContaining) {
					t.Fatalf("error %v, result %.200v", err, got)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("result (-want +got):\n%s", diff)
				}
			}
			if n := calls.Load(); n != tc.wantCalls {
				t.Fatalf("%d requests, want %d", n, tc.wantCalls)
			}
		})
	}
}

func TestHTTPToolHeadersStayWithTheirServer(t *testing.T) {
	var got http.Header
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		_, _ = io.WriteString(w, `{"moved":true}`)
	}))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	c := client(t, newPool(t, tools.Options{}), httpTool("api", redirect.URL), map[string]string{"Authorization": secretToken, "X-Api-Key": "key-0123456789"})
	if res := call(t, c, "api", `{}`, "k"); res.Content != `{"moved":true}` {
		t.Fatalf("result: %+v", res)
	}
	if got.Get("Authorization") != "" || got.Get("X-Api-Key") != "" || got.Get("Idempotency-Key") != "k" {
		t.Fatalf("the other server got %v", got)
	}
}

func TestHTTPToolOutputSchemaMustCompile(t *testing.T) {
	server := httpTool("api", "http://api.invalid/")
	server.HTTP.OutputSchema = rawJSON(`{"$ref":"https://example.com/schema.json"}`)
	_, err := newPool(t, tools.Options{}).Client(ctxFor(t, time.Second), "ns", server, nil)
	if err == nil || !contains(err.Error(), "http.outputSchema", "https://example.com/schema.json") {
		t.Fatalf("error: %v", err)
	}
}
