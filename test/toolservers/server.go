package toolservers

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/test/nodeservers"
)

// Server is a tool server running as a process group of its own.
type Server = nodeservers.Server

// StartEverything runs the reference server-everything in its streamable HTTP mode: its
// command line is `node <install>/node_modules/@modelcontextprotocol/server-everything/dist/index.js
// streamableHttp`, with the port in the PORT environment variable and the endpoint at /mcp.
func StartEverything(ctx context.Context) (*Server, error) {
	dir, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	port, err := nodeservers.FreePort()
	if err != nil {
		return nil, err
	}
	s, err := nodeservers.NewServer(nodeservers.Spec{Name: "toolserver-everything", URL: mcpURL(port),
		Args: []string{filepath.Join(dir, "node_modules", EverythingPackage, "dist", "index.js"), "streamableHttp"},
		Env:  []string{"PORT=" + strconv.Itoa(port)}})
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func mcpURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d/mcp", port) }

// StartMemory runs the reference server-memory, a stdio server, behind the supergateway
// bridge in its stateful streamable HTTP mode, with its knowledge graph in a file of the
// server's directory:
//
//	MEMORY_FILE_PATH=<Dir>/memory.jsonl node <install>/node_modules/supergateway/dist/index.js \
//	  --stdio "node <install>/node_modules/@modelcontextprotocol/server-memory/dist/index.js" \
//	  --outputTransport streamableHttp --stateful --port <port> --logLevel info
//
// The endpoint is at /mcp. The graph lives as long as the file: a restarted server keeps it.
func StartMemory(ctx context.Context) (*Server, error) {
	dir, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	port, err := nodeservers.FreePort()
	if err != nil {
		return nil, err
	}
	node, err := nodeservers.Node()
	if err != nil {
		return nil, err
	}
	memory := filepath.Join(dir, "node_modules", MemoryPackage, "dist", "index.js")
	s, err := nodeservers.NewServer(nodeservers.Spec{Name: "toolserver-memory", URL: mcpURL(port),
		Args: []string{filepath.Join(dir, "node_modules", BridgePackage, "dist", "index.js"),
			"--stdio", shellQuote(node) + " " + shellQuote(memory),
			"--outputTransport", "streamableHttp", "--stateful", "--port", strconv.Itoa(port), "--logLevel", "info"}})
	if err != nil {
		return nil, err
	}
	s.SetEnv("MEMORY_FILE_PATH=" + filepath.Join(s.Dir, "memory.jsonl"))
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// shellQuote quotes s for the shell the bridge runs its child with.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
