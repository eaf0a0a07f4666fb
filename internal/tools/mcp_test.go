package tools_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/internal/tools"
	"github.com/baton-dev/baton/test/toolservers"
)

// The reference server-everything, run for real: what a deployed MCP server answers.
func TestEverything(t *testing.T) {
	t.Parallel() // it waits on the server
	srv := tools.Everything(t)
	c := client(t, newPool(t, tools.Options{}), mcpServer("everything", srv.URL), nil)

	t.Run("lists its tools", func(t *testing.T) {
		listed, err := c.Tools(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		checkEverythingsTools(t, listed)
	})

	t.Run("echo", func(t *testing.T) {
		got := call(t, c, "echo", `{"message":"hello, baton"}`, "uid/1/1")
		if diff := cmp.Diff(tools.Result{Content: "Echo: hello, baton"}, got); diff != "" {
			t.Fatalf("result (-want +got):\n%s", diff)
		}
	})

	t.Run("structured content, checked against the tool's output schema", func(t *testing.T) {
		got := call(t, c, "get-structured-content", `{"location":"Chicago"}`, "uid/1/2")
		want := `{"conditions":"Light rain / drizzle","humidity":82,"temperature":36}`
		if got.IsError || got.Content != want || string(got.Structured) != want {
			t.Fatalf("result: %+v", got)
		}
	})

	t.Run("an error result", func(t *testing.T) {
		got := call(t, c, "get-sum", `{"a":"one"}`, "uid/1/3")
		if !got.IsError || !contains(got.Content, "Input validation error", "expected number") {
			t.Fatalf("result: %+v", got)
		}
	})

	t.Run("an unknown tool: this server answers an error result", func(t *testing.T) {
		got := call(t, c, "no-such-tool", `{}`, "uid/1/4")
		if !got.IsError || !contains(got.Content, "no-such-tool", "not found") {
			t.Fatalf("result: %+v", got)
		}
	})

	t.Run("other contents are described, not given", func(t *testing.T) {
		got := call(t, c, "get-tiny-image", `{}`, "uid/1/5")
		if got.IsError || !contains(got.Content, "[image: image/png, ") || strings.Contains(got.Content, "iVBOR") {
			t.Fatalf("result: %+v", got)
		}
		got = call(t, c, "get-resource-links", `{"count":2}`, "uid/1/6")
		if got.IsError || strings.Count(got.Content, "[resource link: ") != 2 || !contains(got.Content, "demo://resource/") {
			t.Fatalf("result: %+v", got)
		}
		got = call(t, c, "get-resource-reference", `{"resourceType":"Blob","resourceId":3}`, "uid/1/7")
		if got.IsError || !contains(got.Content, "[embedded resource: demo://resource/dynamic/blob/3 (") {
			t.Fatalf("result: %+v", got)
		}
	})
}

// checkEverythingsTools checks that server-everything's tools are listed, and that its echo
// tool comes with its server, its description and the input schema it declares.
func checkEverythingsTools(t *testing.T, listed []tools.Tool) {
	t.Helper()
	for _, want := range []string{"echo", "get-sum", "get-structured-content", "get-tiny-image", "get-resource-links"} {
		if !slices.Contains(names(listed), want) {
			t.Fatalf("%s is not among the tools listed: %v", want, names(listed))
		}
	}
	echo := listed[slices.Index(names(listed), "echo")]
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["message"] == nil {
		t.Fatalf("echo's input schema: %s (%v)", echo.InputSchema, err)
	}
	if echo.Server != "everything" || echo.Description == "" {
		t.Fatalf("echo: %+v", echo)
	}
}

// A server that restarts forgets its sessions: the next call opens a new one, and is made.
func TestReconnectsAfterTheServerRestarts(t *testing.T) {
	t.Parallel() // each has its own server, and waits on it
	ctx := ctxFor(t, 5*time.Minute)
	srv := start(t, toolservers.StartEverything)
	c := client(t, newPool(t, tools.Options{}), mcpServer("everything", srv.URL), nil)
	if got := call(t, c, "echo", `{"message":"before"}`, "k1"); got.Content != "Echo: before" {
		t.Fatalf("before the restart: %+v", got)
	}
	for i := range 2 {
		// Let the tool list settle (this server announces tools it adds once a session starts),
		// so that the first request after the restart is the call itself.
		time.Sleep(300 * time.Millisecond)
		if _, err := c.Tools(ctx); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if got := call(t, c, "echo", `{"message":"after"}`, "k2"); got.Content != "Echo: after" || got.IsError {
			t.Fatalf("after restart %d: %+v", i+1, got)
		}
	}
	if _, err := c.Tools(ctx); err != nil {
		t.Fatalf("listing after the restarts: %v", err)
	}
}

// The reference server-memory, a stdio server, behind the bridge.
func TestMemoryServerThroughTheBridge(t *testing.T) {
	t.Parallel() // each has its own server, and waits on it
	srv := start(t, toolservers.StartMemory)
	c := client(t, newPool(t, tools.Options{}), mcpServer("memory", srv.URL), nil)
	listed, err := c.Tools(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names(listed), "create_entities") || !slices.Contains(names(listed), "search_nodes") {
		t.Fatalf("tools: %v", names(listed))
	}
	created := call(t, c, "create_entities",
		`{"entities":[{"name":"Ada Lovelace","entityType":"person","observations":["wrote the first program"]}]}`, "run/1/1")
	if created.IsError || !strings.Contains(created.Content, "Ada Lovelace") {
		t.Fatalf("create_entities: %+v", created)
	}
	found := call(t, c, "search_nodes", `{"query":"first program"}`, "run/1/2")
	var graph struct {
		Entities []struct {
			Name         string   `json:"name"`
			Observations []string `json:"observations"`
		} `json:"entities"`
	}
	if err := json.Unmarshal(found.Structured, &graph); err != nil || found.IsError {
		t.Fatalf("search_nodes: %+v (%v)", found, err)
	}
	if len(graph.Entities) != 1 || graph.Entities[0].Name != "Ada Lovelace" || graph.Entities[0].Observations[0] != "wrote the first program" {
		t.Fatalf("search_nodes found %+v", graph)
	}
}

// Runs call at once through the one client of a server.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel() // it waits on the server
	srv := tools.Everything(t)
	c := client(t, newPool(t, tools.Options{}), mcpServer("everything", srv.URL), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16*4)
	for i := range 16 {
		wg.Go(func() {
			if _, err := c.Tools(ctxFor(t, time.Minute)); err != nil {
				errs <- err
			}
			for j := range 3 {
				msg := fmt.Sprintf("run %d call %d", i, j)
				res, err := c.Call(ctxFor(t, time.Minute), tools.Call{Tool: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"message":%q}`, msg)), IdempotencyKey: msg})
				if err == nil && res.Content != "Echo: "+msg {
					err = fmt.Errorf("%s: %+v", msg, res)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
