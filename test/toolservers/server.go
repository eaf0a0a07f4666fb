package toolservers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// startTimeout bounds how long a server may take to answer its first request.
const startTimeout = 60 * time.Second

// Server is a tool server running as a process group of its own.
type Server struct {
	// URL is the server's MCP endpoint, on the loopback address. (The servers have no option
	// to choose their interface: they listen on all of them, on a port free when started.)
	URL string
	// Log is the file the server's output goes to (a restarted server's too): read it when a
	// test fails.
	Log string
	// Dir holds the log and the server's data; it stays after Stop.
	Dir string

	name string
	port int
	argv []string
	env  []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartEverything runs the reference server-everything in its streamable HTTP mode: its
// command line is `node <install>/node_modules/@modelcontextprotocol/server-everything/dist/index.js
// streamableHttp`, with the port in the PORT environment variable and the endpoint at /mcp.
func StartEverything(ctx context.Context) (*Server, error) {
	dir, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s, err := newServer("everything", port)
	if err != nil {
		return nil, err
	}
	s.argv = []string{filepath.Join(dir, "node_modules", EverythingPackage, "dist", "index.js"), "streamableHttp"}
	s.env = []string{"PORT=" + strconv.Itoa(port)}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

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
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	node, err := nodePath()
	if err != nil {
		return nil, err
	}
	s, err := newServer("memory", port)
	if err != nil {
		return nil, err
	}
	memory := filepath.Join(dir, "node_modules", MemoryPackage, "dist", "index.js")
	s.argv = []string{filepath.Join(dir, "node_modules", BridgePackage, "dist", "index.js"),
		"--stdio", shellQuote(node) + " " + shellQuote(memory),
		"--outputTransport", "streamableHttp", "--stateful", "--port", strconv.Itoa(port), "--logLevel", "info"}
	s.env = []string{"MEMORY_FILE_PATH=" + filepath.Join(s.Dir, "memory.jsonl")}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// newServer makes a server's directory: its log, and its data if it keeps any. The directory
// stays after Stop, for a look at what went wrong.
func newServer(name string, port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "baton-toolserver-"+name+"-")
	if err != nil {
		return nil, err
	}
	return &Server{name: name, port: port, Dir: dir, Log: filepath.Join(dir, "server.log"),
		URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}, nil
}

// Restart stops the server and starts it again on the same port, as a deployment does when its
// pod is replaced: sessions clients held are gone.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}

// Stop ends the server's whole process group and waits for it: SIGTERM first (the bridge then
// stops the children it started in process groups of their own), SIGKILL after 3 seconds.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = signalGroup(cmd, false)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
	// Whatever of the group is left, and a leader that did not end.
	_ = signalGroup(cmd, true)
	<-done
}

// start runs the server's command and waits until its endpoint answers.
func (s *Server) start(ctx context.Context) error {
	node, err := nodePath()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	// The servers get no environment of the test's beyond what node needs: server-everything
	// has a tool that prints its environment.
	cmd := exec.Command(node, s.argv...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}, s.env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the %s MCP server: %w", s.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitReady(ctx, done); err != nil {
		s.Stop()
		return fmt.Errorf("the %s MCP server did not start: %w\n%s", s.name, err, s.LogTail(8<<10))
	}
	return nil
}

// waitReady waits until the endpoint answers HTTP at all: any status means it is listening.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("it exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LogTail is the last n bytes of the server's output.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.Log)
	if err != nil {
		return err.Error()
	}
	return tail(b, n)
}

// freePort is a TCP port free on the loopback address a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shellQuote quotes s for the shell the bridge runs its child with.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
