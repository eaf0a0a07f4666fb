// Command countingtool serves toolservers.CountingTool: an HTTP tool that counts its calls per
// Idempotency-Key, for tests that run the operator out of process (GET /calls has the counts).
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/baton-dev/baton/test/toolservers"
)

func main() {
	addr := flag.String("addr", ":8080", "address to listen on")
	delay := flag.Duration("delay", 0, "hold every answer this long")
	flag.Parse()
	tool := &toolservers.CountingTool{}
	tool.SetDelay(*delay)
	server := &http.Server{Addr: *addr, Handler: tool, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.ListenAndServe())
}
