package toolservers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/test/nodeservers"
)

// Two installs at once into an empty cache: both end with the same complete install, and no
// temporary directory is left behind.
func TestInstallConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := t.TempDir()
	start := time.Now()
	var wg sync.WaitGroup
	dirs, errs := make([]string, 2), make([]error, 2)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = nodeservers.InstallUnder(ctx, root, Packages()) })
	}
	wg.Wait()
	t.Logf("two concurrent installs into an empty cache took %v", time.Since(start).Round(time.Millisecond))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if dirs[0] != dirs[1] || !nodeservers.Complete(dirs[0]) {
		t.Fatalf("installed into %v", dirs)
	}
	for _, pkg := range []struct{ name, version string }{{EverythingPackage, EverythingVersion}, {MemoryPackage, MemoryVersion}, {BridgePackage, BridgeVersion}} {
		var manifest struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(dirs[0], "node_modules", pkg.name, "package.json"))
		if err != nil || json.Unmarshal(b, &manifest) != nil || manifest.Version != pkg.version {
			t.Fatalf("%s: version %q, want %q (%v)", pkg.name, manifest.Version, pkg.version, err)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the cache holds %v (%v)", entries, err)
	}
	again := time.Now()
	if dir, err := nodeservers.InstallUnder(ctx, root, Packages()); err != nil || dir != dirs[0] || time.Since(again) > time.Second {
		t.Fatalf("a second install: %s, %v, after %v", dir, err, time.Since(again))
	}
}

func TestCountingTool(t *testing.T) {
	tool := NewCountingTool()
	defer tool.Close()
	post := func(key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, tool.URL, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, key := range []string{"a", "b", "a", "c", "a", "c"} {
		if status := post(key, `{"n":1}`); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
	}
	if status := post("d", `not json`); status != http.StatusBadRequest {
		t.Fatalf("a call that is not JSON: %d", status)
	}
	if n, r := len(tool.Calls()), tool.Repeated(); n != 6 || r != 2 {
		t.Fatalf("%d calls, %d keys repeated", n, r)
	}
	resp, err := http.Get(strings.TrimSuffix(tool.URL, "/call") + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var counts CallCounts
	if err := json.NewDecoder(resp.Body).Decode(&counts); err != nil || counts.Calls != 6 || counts.Repeated != 2 || counts.Keys["a"] != 3 {
		t.Fatalf("GET /calls: %+v (%v)", counts, err)
	}
}
