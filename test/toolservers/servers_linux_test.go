package toolservers

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServersStartAndStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for name, run := range map[string]func(context.Context) (*Server, error){"everything": StartEverything, "memory": StartMemory} {
		t.Run(name, func(t *testing.T) {
			s, err := run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.HasSuffix(s.URL, "/mcp") {
				t.Fatalf("URL %s", s.URL)
			}
			if err := initialize(ctx, s.URL); err != nil {
				t.Fatalf("%v\n%s", err, s.LogTail(4096))
			}
			pid := s.Pid()
			children := childrenOf(pid)
			if name == "memory" && len(children) == 0 {
				t.Fatal("the bridge runs no child")
			}
			s.Stop()
			checkStopped(ctx, t, s, pid, children)
		})
	}
}

// checkStopped checks that a stopped server's process group and the children it started are
// gone, that it answers no more, and that its log is kept.
func checkStopped(ctx context.Context, t *testing.T, s *Server, pid int, children []int) {
	t.Helper()
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the process group lives on after Stop: %v", err)
	}
	for _, child := range children {
		if alive(child) {
			t.Fatalf("process %d, started by the server, lives on after Stop", child)
		}
	}
	if err := initialize(ctx, s.URL); err == nil {
		t.Fatal("the server answers after Stop")
	}
	if _, err := os.Stat(s.Log); err != nil {
		t.Fatalf("log: %v", err)
	}
}

// childrenOf is the processes whose parent is pid, read from /proc.
func childrenOf(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether a process runs: one that is gone or a zombie does not.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// initialize sends an MCP initialize request and expects an answer naming a protocol version.
func initialize(ctx context.Context, url string) error {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(buf[:n]), `"protocolVersion"`) {
		return errors.New("initialize answered " + resp.Status + ": " + string(buf[:n]))
	}
	return nil
}
