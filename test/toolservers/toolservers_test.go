package toolservers

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/test/nodeservers"
)

// The machine's install holds the versions the lockfile pins. (Installs meeting in an empty
// cache are nodeservers' test.)
func TestTheInstallHoldsThePinnedVersions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := Install(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !nodeservers.Complete(dir) {
		t.Fatalf("%s is not a whole install", dir)
	}
	for _, pkg := range []struct{ name, version string }{{EverythingPackage, EverythingVersion}, {MemoryPackage, MemoryVersion}, {BridgePackage, BridgeVersion}} {
		var manifest struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg.name, "package.json"))
		if err != nil || json.Unmarshal(b, &manifest) != nil || manifest.Version != pkg.version {
			t.Fatalf("%s: version %q, want %q (%v)", pkg.name, manifest.Version, pkg.version, err)
		}
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
