package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// The log is copied into the database in the background, well before it would reach the size
// at which a commit copies it: a reader of the database file alone (immutable, which ignores
// the log) sees the records while the store is still open, after a few appends.
func TestTheLogIsCheckpointedWithoutACommitWaitingForIt(t *testing.T) {
	ctx := context.Background()
	s, path := openSQLite(t)
	const steps = 10
	for i := 1; i <= steps; i++ {
		if _, err := s.Append(ctx, transcript.Record{RunUID: "uid-1", Namespace: "ns", Run: "run-1",
			Key: transcript.Key{Kind: transcript.KindStep, Step: int32(i)}, Time: time.Unix(int64(i), 0), Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := inTheFile(ctx, path)
		if err == nil && n == steps {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file holds %d records (%v) 10 s after %d were appended; want them checkpointed", n, err, steps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inTheFile counts the records in the database file, not in its log: an immutable connection
// reads the file alone, and caches what it read, so each count opens one of its own.
func inTheFile(ctx context.Context, path string) (int, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?immutable=1")
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	n := 0
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM records").Scan(&n)
	return n, err
}

// openSQLite opens a SQLite store in a directory of the test's, closed with the test; it returns
// the database file's path beside it.
func openSQLite(t *testing.T) (transcript.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "transcript.db")
	s, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}
