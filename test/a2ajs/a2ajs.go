// Package a2ajs runs the A2A samples written with the protocol's JavaScript SDK
// (config/samples/a2a: the stock agent, and the client that calls a Baton team), installed from
// npm at the versions the sample's lockfile pins, for Baton's tests.
package a2ajs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/baton-dev/baton/test/nodeservers"
)

// SDKPackage is the A2A JavaScript SDK, and SDKVersion the version the samples pin.
const (
	SDKPackage = "@a2a-js/sdk"
	SDKVersion = "1.3.0"
)

// SamplesDir is config/samples/a2a in the repository the test runs in: the nearest directory
// above the working directory (a test's package) that holds go.mod. The source file's own path
// is not used: builds with -trimpath keep module paths, not directories.
func SamplesDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("config", "samples", "a2a")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "config", "samples", "a2a")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "config", "samples", "a2a")
		}
	}
}

// Packages is the samples' pinned set of packages.
func Packages() (nodeservers.Packages, error) {
	manifest, err := os.ReadFile(filepath.Join(SamplesDir(), "package.json"))
	if err != nil {
		return nodeservers.Packages{}, err
	}
	lock, err := os.ReadFile(filepath.Join(SamplesDir(), "package-lock.json"))
	if err != nil {
		return nodeservers.Packages{}, err
	}
	return nodeservers.Packages{Name: "the A2A samples", Manifest: manifest, Lock: lock, Require: []string{SDKPackage, "express"}}, nil
}

// Script is a script (a sample's, by its name in SamplesDir, or a path), copied beside the
// install's node_modules (ES modules resolve packages from where the script is), ready to run.
func Script(ctx context.Context, name string) (string, error) {
	p, err := Packages()
	if err != nil {
		return "", err
	}
	dir, err := nodeservers.Install(ctx, p)
	if err != nil {
		return "", err
	}
	path := name
	if !filepath.IsAbs(name) {
		path = filepath.Join(SamplesDir(), name)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	// The copy is named by the process, so that tests running at once do not write one file.
	dst := filepath.Join(dir, fmt.Sprintf("run-%d-%s", os.Getpid(), filepath.Base(name)))
	if err := os.WriteFile(dst, src, 0o644); err != nil {
		return "", err
	}
	return dst, nil
}

// StartStockAgent runs the sample stock agent on a free loopback port; its URL is the base URL
// its card is served under.
func StartStockAgent(ctx context.Context) (*nodeservers.Server, error) {
	return StartAgent(ctx, "stock-agent.mjs")
}

// StartAgent runs an agent's script (as Script names it) on a free loopback port, given in the
// PORT environment variable; its URL is the base URL its card is served under.
func StartAgent(ctx context.Context, name string) (*nodeservers.Server, error) {
	script, err := Script(ctx, name)
	if err != nil {
		return nil, err
	}
	port, err := nodeservers.FreePort()
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	s, err := nodeservers.NewServer(nodeservers.Spec{Name: "a2a-agent", Args: []string{script},
		Env: []string{"PORT=" + strconv.Itoa(port)}, URL: url, Probe: url + "/.well-known/agent-card.json"})
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
