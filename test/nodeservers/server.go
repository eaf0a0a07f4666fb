package nodeservers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

// startTimeout bounds how long a server may take to answer its first request.
const startTimeout = 60 * time.Second

// Spec is a Node server to run.
type Spec struct {
	// Name names the server in errors and its directory.
	Name string
	// Args are node's arguments: the script and its own.
	Args []string
	// Env is added to the little of the test's environment a server gets (PATH, HOME, TMPDIR).
	Env []string
	// URL is the server's endpoint; Probe, when set, is what is asked until it answers
	// (else URL).
	URL, Probe string
}

// Server is a Node server running as a process group of its own.
type Server struct {
	// URL is the server's endpoint, on the loopback address.
	URL string
	// Log is the file the server's output goes to (a restarted server's too): read it when a
	// test fails.
	Log string
	// Dir holds the log and the server's data; it stays after Stop.
	Dir string

	spec Spec

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// NewServer makes a server's directory: its log, and its data if it keeps any. The directory
// stays after Stop, for a look at what went wrong. Start runs it.
func NewServer(spec Spec) (*Server, error) {
	dir, err := os.MkdirTemp("", "baton-"+spec.Name+"-")
	if err != nil {
		return nil, err
	}
	return &Server{spec: spec, URL: spec.URL, Dir: dir, Log: dir + "/server.log"}, nil
}

// SetEnv adds to the server's environment, before it starts.
func (s *Server) SetEnv(env ...string) { s.spec.Env = append(s.spec.Env, env...) }

// Restart stops the server and starts it again on the same port, as a deployment does when its
// pod is replaced: sessions clients held are gone.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.Start(ctx)
}

// Stop ends the server's whole process group and waits for it: SIGTERM first (a bridge then
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

// Pid is the server process's, 0 when it does not run.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Start runs the server's command and waits until its endpoint answers.
func (s *Server) Start(ctx context.Context) error {
	node, err := Node()
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
	cmd := exec.Command(node, s.spec.Args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}, s.spec.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the %s server: %w", s.spec.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitReady(ctx, done); err != nil {
		s.Stop()
		return fmt.Errorf("the %s server did not start: %w\n%s", s.spec.Name, err, s.LogTail(8<<10))
	}
	return nil
}

// waitReady waits until the endpoint answers HTTP at all: any status means it is listening.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	probe := s.spec.Probe
	if probe == "" {
		probe = s.URL
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
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

// FreePort is a TCP port free on the loopback address a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
