package transcript

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// postgres is PostgreSQL's dialect. Replicas that start at once take turns migrating under an
// advisory lock.
var postgres = dialect{
	name:        "PostgreSQL",
	greatest:    "GREATEST",
	placeholder: func(i int) string { return fmt.Sprintf("$%d", i) },
	lock:        "SELECT pg_advisory_xact_lock(4242424242)",
	migrations: []string{
		`CREATE TABLE records (
			seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			run_uid TEXT NOT NULL,
			namespace TEXT NOT NULL,
			run TEXT NOT NULL,
			kind TEXT NOT NULL,
			step INTEGER NOT NULL,
			attempt INTEGER NOT NULL,
			call INTEGER NOT NULL,
			time_ns BIGINT NOT NULL,
			body BYTEA NOT NULL,
			UNIQUE (run_uid, kind, step, attempt, call)
		);
		CREATE INDEX records_run ON records (run_uid, seq);
		CREATE INDEX records_namespace ON records (namespace, run_uid);`,
		`CREATE TABLE runs (
			run_uid TEXT PRIMARY KEY,
			namespace TEXT NOT NULL,
			run TEXT NOT NULL,
			last_ns BIGINT NOT NULL
		);
		INSERT INTO runs (run_uid, namespace, run, last_ns)
			SELECT run_uid, namespace, run, MAX(time_ns) FROM records GROUP BY run_uid, namespace, run;
		CREATE INDEX runs_namespace ON runs (namespace, run);`,
	},
}

func openPostgres(ctx context.Context, dsn string) (Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the DSN; say which without it.
		return nil, fmt.Errorf("transcript store %s: not a valid PostgreSQL DSN", Redact(dsn))
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	s := &sqlStore{db: db, rdb: db, d: postgres}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("transcript store %s: %w", Redact(dsn), err)
	}
	return s, nil
}
