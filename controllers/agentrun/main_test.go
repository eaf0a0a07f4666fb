package agentrun

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain gives the package's logs a sink, as the manager does: without one, controller-runtime
// puts one in place by itself after 30 s, racing the status writer's logs.
func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
