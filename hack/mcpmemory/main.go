// Command mcpmemory runs the MCP memory server (@modelcontextprotocol/server-memory, installed
// from npm once per machine) behind its streamable HTTP bridge on loopback, for the quickstart's
// helpdesk-memory sample. It prints the server's URL once it answers, and stops it on SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baton-dev/baton/test/toolservers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	srv, err := toolservers.StartMemory(start)
	if err != nil {
		cancel()
		stop()
		fmt.Fprintln(os.Stderr, "starting the MCP memory server:", err)
		os.Exit(1) //nolint:gocritic // exitAfterDefer: both contexts are released just above
	}
	fmt.Printf("MCP memory server ready at %s (log: %s)\n", srv.URL, srv.Log)
	<-ctx.Done()
	srv.Stop()
}
