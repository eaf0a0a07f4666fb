// Package pgtest starts a throwaway PostgreSQL server on loopback for tests: a real server from
// the machine's PostgreSQL installation (hack/postgres.sh installs Debian's package where it is
// missing), in a temporary directory, gone when the test binary ends. Set
// BATON_TEST_POSTGRES_DSN to use a server of your own instead.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server.
type Server struct {
	// DSN reaches the server's postgres database as a superuser.
	DSN  string
	dir  string
	proc *exec.Cmd
}

// Start starts a server, or uses the one BATON_TEST_POSTGRES_DSN names.
func Start(ctx context.Context) (*Server, error) {
	if dsn := os.Getenv("BATON_TEST_POSTGRES_DSN"); dsn != "" {
		return &Server{DSN: dsn}, nil
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	// PostgreSQL refuses to run as root: as root, run it as the postgres user.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user to run PostgreSQL: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := run("initdb", "-D", data, "-U", "baton", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		s.Stop()
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.proc = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200")
	s.proc.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	s.proc.Stdout, s.proc.Stderr = log, log
	if err := s.proc.Start(); err != nil {
		s.Stop()
		return nil, err
	}
	s.DSN = fmt.Sprintf("postgres://baton@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, s.DSN)
		if err == nil {
			_ = conn.Close(ctx)
			return s, nil
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			s.Stop()
			return nil, fmt.Errorf("PostgreSQL did not accept connections in 30s: %w\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Database creates a database of that name and returns its DSN.
func (s *Server) Database(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	cfg, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name), nil
}

// Stop stops the server and removes its files.
func (s *Server) Stop() {
	if s.proc != nil && s.proc.Process != nil {
		_ = s.proc.Process.Signal(syscall.SIGINT) // fast shutdown
		done := make(chan struct{})
		go func() { _ = s.proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGKILL)
		}
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// binDir finds PostgreSQL's programs: PG_BIN, else the newest Debian installation.
func binDir() (string, error) {
	if dir := os.Getenv("PG_BIN"); dir != "" {
		return dir, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", errors.New("PostgreSQL is not installed: run hack/postgres.sh (make test does), or set PG_BIN or BATON_TEST_POSTGRES_DSN")
	}
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[j]))))
		return vi < vj
	})
	return filepath.Dir(found[len(found)-1]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
