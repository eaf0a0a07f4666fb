package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every flag the chart gives either Deployment, with any values, is one the manager has: a flag
// the manager lacks stops it at start, in every pod. The manager is built from this tree (make
// test-helm passes the one make build made as MANAGER_BIN).
func TestEveryFlagTheChartPassesIsTheManagers(t *testing.T) {
	bin := os.Getenv("MANAGER_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "manager")
		if out, err := run(t, nil, nil, "go", "build", "-o", bin, filepath.Join(root, "cmd", "manager")); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// The flag package prints its usage to stderr.
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		known["--"+m[1]] = true
	}
	if !known["--webhook-only"] {
		t.Fatalf("manager --help does not list --webhook-only; it printed:\n%s", help)
	}

	// extraArgs pass flags through as they are written; the variants' are the manager's too.
	used := map[string][]string{}
	for _, v := range variants {
		objs := mustTemplate(t, v.values)
		for _, d := range []string{"baton-controller-manager", "baton-webhook"} {
			for _, a := range args(container(t, objs, d)) {
				flag, _, _ := strings.Cut(a, "=")
				used[flag] = append(used[flag], v.name)
			}
		}
	}
	flags := make([]string, 0, len(used))
	for f := range used {
		flags = append(flags, f)
	}
	sort.Strings(flags)
	for _, f := range flags {
		if !known[f] {
			t.Errorf("the chart passes %s (with %s), which the manager does not have", f, used[f][0])
		}
	}
}
