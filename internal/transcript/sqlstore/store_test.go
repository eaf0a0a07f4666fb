package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/internal/transcript/storetest"
	"github.com/baton-dev/baton/test/pgtest"
)

var postgres *pgtest.Server

func TestMain(m *testing.M) {
	var err error
	postgres, err = pgtest.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL for the conformance suite:", err)
		os.Exit(1)
	}
	code := m.Run()
	postgres.Stop()
	os.Exit(code)
}

func TestSQLiteConformance(t *testing.T) {
	dir := t.TempDir()
	storetest.Run(t, func(t *testing.T, name string) transcript.Store {
		s, err := sqlstore.Open(context.Background(), filepath.Join(dir, name, "transcript.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestPostgreSQLConformance(t *testing.T) {
	var mu sync.Mutex
	dsns := map[string]string{}
	storetest.Run(t, func(t *testing.T, name string) transcript.Store {
		mu.Lock()
		dsn, ok := dsns[name]
		if !ok {
			var err error
			if dsn, err = postgres.Database(context.Background(), "conformance_"+name); err != nil {
				mu.Unlock()
				t.Fatal(err)
			}
			dsns[name] = dsn
		}
		mu.Unlock()
		s, err := sqlstore.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestOpenSaysWhatADSNIsWithoutItsPassword(t *testing.T) {
	for dsn, want := range map[string]string{
		"mysql://u:hunter2@db/x":                     "not a path, sqlite:// or postgres:// DSN",
		"postgres://u:hunter2@127.0.0.1:1/x?sslmode": "transcript store postgres://u:xxxxx@127.0.0.1:1/x",
		"": "no DSN",
	} {
		_, err := sqlstore.Open(context.Background(), dsn)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): want an error with %q and no password, got %v", dsn, want, err)
		}
	}
}
