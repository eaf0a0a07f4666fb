package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the SQLite driver: pure Go, so the image stays static and distroless

	"github.com/baton-dev/baton/internal/transcript"
)

// sqlite is the embedded store's dialect. Write-ahead logging lets readers (the transcript API)
// go on while a step is written; synchronous=NORMAL makes each commit survive the operator's
// crash (kill -9) without an fsync per step; a power loss may lose the latest commits, whose
// steps then run again, as steps in flight do.
var sqlite = dialect{
	name:        "SQLite",
	greatest:    "max",
	placeholder: func(i int) string { return fmt.Sprintf("?%d", i) },
	migrations:  migrations(columnTypes{serial: "INTEGER PRIMARY KEY AUTOINCREMENT", bigint: "INTEGER", bytes: "BLOB"}),
}

func openSQLite(ctx context.Context, path string) (transcript.Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("transcript store: %w", err)
		}
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(ON)",
		fmt.Sprintf("wal_autocheckpoint(%d)", checkpointBackstop)} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	// SQLite takes one writer at a time, and a writer that finds the database locked sleeps and
	// tries again: hundreds of steps ending at once would spend their time asleep. So writes go
	// through one connection, queued by the pool in order, and reads through a pool of their
	// own, which write-ahead logging lets run beside the writer.
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("transcript store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &sqlStore{db: db, rdb: db, d: sqlite, st: newStatements(sqlite)}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("transcript store %s: %w", path, err)
	}
	rq := url.Values{"_pragma": {"busy_timeout(10000)", "query_only(1)"}}
	if s.rdb, err = sql.Open("sqlite", "file:"+path+"?"+rq.Encode()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("transcript store %s: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(4)
	// Idle readers are kept, with the statements prepared on them.
	s.rdb.SetMaxIdleConns(4)
	cp, err := sql.Open("sqlite", "file:"+path+"?"+url.Values{"_pragma": {"busy_timeout(10000)"}}.Encode())
	if err == nil {
		cp.SetMaxOpenConns(1)
		s.checkpoints = newCheckpointer(cp)
		err = s.st.prepare(ctx, s.db, s.rdb)
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("transcript store %s: %w", path, err)
	}
	s.group = newCommitter(s)
	return s, nil
}
