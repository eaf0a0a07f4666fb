// Package toolservers runs real tool servers for Baton's tests: the reference MCP servers
// (server-everything over streamable HTTP, server-memory behind a stdio-to-streamable-HTTP
// bridge) installed from npm at pinned versions, and an in-process HTTP tool that counts its
// calls per idempotency key. Nothing starts until a test asks for it.
package toolservers

import (
	"context"
	"embed"

	"github.com/baton-dev/baton/test/nodeservers"
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

// Packages is the pinned set of the MCP servers.
func Packages() nodeservers.Packages {
	manifest, _ := npmFiles.ReadFile("npm/package.json")
	lock, _ := npmFiles.ReadFile("npm/package-lock.json")
	return nodeservers.Packages{Name: "the test's MCP servers", Manifest: manifest, Lock: lock,
		Require: []string{EverythingPackage, MemoryPackage, BridgePackage}}
}

// Install installs the MCP servers once per machine (nodeservers.Install).
func Install(ctx context.Context) (string, error) { return nodeservers.Install(ctx, Packages()) }
