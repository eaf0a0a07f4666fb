// Package toolservers runs real tool servers for Baton's tests: the reference MCP servers
// (server-everything over streamable HTTP, server-memory behind a stdio-to-streamable-HTTP
// bridge) installed from npm at pinned versions, and an in-process HTTP tool that counts its
// calls per idempotency key. Nothing starts until a test asks for it.
package toolservers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// The pinned npm packages. npm/package-lock.json pins everything they depend on too, so every
// machine runs the same code; change these only together with the lockfile (run
// `npm install --package-lock-only` in npm/ after editing package.json).
const (
	EverythingPackage = "@modelcontextprotocol/server-everything"
	EverythingVersion = "2026.8.31"
	MemoryPackage     = "@modelcontextprotocol/server-memory"
	MemoryVersion     = "2026.8.31"
	// BridgePackage serves a stdio MCP server over streamable HTTP. supergateway declares
	// support for Node 20, keeps one child and one MCP session per client in its --stateful
	// mode (as a deployed server would), and speaks the protocol versions the Go SDK offers.
	BridgePackage = "supergateway"
	BridgeVersion = "4.0.0"
)

//go:embed npm/package.json npm/package-lock.json
var npmFiles embed.FS

// installed is the directory this process installed into or found, once one has.
var installed struct {
	sync.Mutex
	dir string
}

// Install installs the pinned packages, once per machine: into
// $XDG_CACHE_HOME/baton/npm/<digest of the lockfile> (else ~/.cache/baton/npm/<digest>), outside
// the repository. An install that is already there is used as is. Processes that install at the
// same time each install into a directory of their own and rename it into place; the first one
// wins and the others use its copy. A failed install's error carries npm's output.
func Install(ctx context.Context) (string, error) {
	installed.Lock()
	defer installed.Unlock()
	if installed.dir != "" {
		return installed.dir, nil
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir, err := install(ctx, root)
	if err != nil {
		return "", err
	}
	installed.dir = dir
	return dir, nil
}

// install installs the pinned packages under root, unless they are there already.
func install(ctx context.Context, root string) (string, error) {
	manifest, err := npmFiles.ReadFile("npm/package.json")
	if err != nil {
		return "", err
	}
	lock, err := npmFiles.ReadFile("npm/package-lock.json")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(append([]byte{}, manifest...), lock...))
	dir := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if complete(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, filepath.Base(dir)+".installing-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for name, data := range map[string][]byte{"package.json": manifest, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", err
		}
	}
	if err := npmInstall(ctx, tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil && !complete(dir) {
		return "", fmt.Errorf("moving the npm install into place: %w", err)
	}
	return dir, nil
}

// completeMarker is written last into an install: a directory without it is not used.
const completeMarker = ".baton-install-complete"

func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, completeMarker))
	return err == nil
}

func cacheRoot() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for the npm install: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "baton", "npm"), nil
}

// npmInstall installs the lockfile's tree into dir.
func npmInstall(ctx context.Context, dir string) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("npm is needed to install the test's MCP servers: %w", err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-update-notifier",
		"--ignore-scripts", "--prefix", dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install of the test's MCP servers in %s failed: %w\n%s", dir, err, tail(out.Bytes(), 16<<10))
	}
	for _, pkg := range []string{EverythingPackage, MemoryPackage, BridgePackage} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			return fmt.Errorf("npm install left %s out: %w\n%s", pkg, err, tail(out.Bytes(), 16<<10))
		}
	}
	return nil
}

// tail is the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = append([]byte("…"), b[len(b)-n:]...)
	}
	return string(b)
}

// nodePath is the node binary that runs the servers.
func nodePath() (string, error) {
	if p, err := exec.LookPath("node"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/node"); err == nil {
		return "/usr/bin/node", nil
	}
	return "", errors.New("node is needed to run the test's MCP servers and is not on PATH")
}
