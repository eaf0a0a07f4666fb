package nodeservers

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// Two installs at once into an empty cache: both end with the same complete install, and no
// temporary directory is left behind. The set is one local package, so that what is tried is the
// installs' meeting, not the registry.
func TestInstallConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := Packages{Name: "a package of nothing", Manifest: []byte(`{"name":"nothing","version":"1.0.0","private":true}`),
		Lock: []byte(`{"name":"nothing","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"nothing","version":"1.0.0"}}}`)}
	root := t.TempDir()
	var wg sync.WaitGroup
	dirs, errs := make([]string, 2), make([]error, 2)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = InstallUnder(ctx, root, p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if dirs[0] != dirs[1] || !Complete(dirs[0]) {
		t.Fatalf("installed into %v", dirs)
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the cache holds %v (%v)", entries, err)
	}
	again := time.Now()
	if dir, err := InstallUnder(ctx, root, p); err != nil || dir != dirs[0] || time.Since(again) > time.Second {
		t.Fatalf("a second install: %s, %v, after %v", dir, err, time.Since(again))
	}
	p.Require = []string{"left-out"}
	p.Manifest = []byte(`{"name":"nothing","version":"1.0.1","private":true}`)
	if _, err := InstallUnder(ctx, root, p); err == nil {
		t.Fatal("an install that left a required package out succeeded")
	}
}
