// Package nodeservers installs pinned sets of npm packages once per machine and runs Node
// servers from them, for Baton's tests and samples: the reference MCP servers (package
// toolservers) and the A2A JavaScript SDK's agents and clients (package a2ajs).
package nodeservers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Packages is a pinned set of npm packages: its package.json, and a package-lock.json that pins
// everything they depend on too, so that every machine runs the same code. Require names the
// packages an install must hold.
type Packages struct {
	// Name says what the packages are for, in errors.
	Name           string
	Manifest, Lock []byte
	Require        []string
}

// installs are the directories this process installed into or found, by digest.
var installs struct {
	sync.Mutex
	dirs map[string]string
}

// Install installs the packages, once per machine: into $XDG_CACHE_HOME/baton/npm/<digest of
// the manifest and lockfile> (else ~/.cache/baton/npm/<digest>), outside the repository. An
// install that is already there is used as is. Processes that install at the same time each
// install into a directory of their own and rename it into place; the first one wins and the
// others use its copy. A failed install's error carries npm's output.
func Install(ctx context.Context, p Packages) (string, error) {
	installs.Lock()
	defer installs.Unlock()
	key := p.digest()
	if dir, ok := installs.dirs[key]; ok {
		return dir, nil
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir, err := InstallUnder(ctx, root, p)
	if err != nil {
		return "", err
	}
	if installs.dirs == nil {
		installs.dirs = map[string]string{}
	}
	installs.dirs[key] = dir
	return dir, nil
}

func (p Packages) digest() string {
	sum := sha256.Sum256(append(append([]byte{}, p.Manifest...), p.Lock...))
	return hex.EncodeToString(sum[:8])
}

// InstallUnder installs the packages under root, unless they are there already.
func InstallUnder(ctx context.Context, root string, p Packages) (string, error) {
	dir := filepath.Join(root, p.digest())
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
	for name, data := range map[string][]byte{"package.json": p.Manifest, "package-lock.json": p.Lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", err
		}
	}
	if err := npmInstall(ctx, tmp, p); err != nil {
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

// Complete reports whether dir holds a whole install.
func Complete(dir string) bool { return complete(dir) }

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
func npmInstall(ctx context.Context, dir string, p Packages) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("npm is needed to install %s: %w", p.Name, err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-update-notifier",
		"--ignore-scripts", "--prefix", dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install of %s in %s failed: %w\n%s", p.Name, dir, err, tail(out.Bytes(), 16<<10))
	}
	for _, pkg := range p.Require {
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

// Node is the node binary that runs the servers.
func Node() (string, error) {
	if p, err := exec.LookPath("node"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/node"); err == nil {
		return "/usr/bin/node", nil
	}
	return "", errors.New("node is needed to run the test's Node servers and is not on PATH")
}
