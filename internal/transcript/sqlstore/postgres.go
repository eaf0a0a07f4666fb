package sqlstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/baton-dev/baton/internal/transcript"
)

// postgres is PostgreSQL's dialect. Replicas that start at once take turns migrating under an
// advisory lock.
var postgres = dialect{
	name:        "PostgreSQL",
	greatest:    "GREATEST",
	placeholder: func(i int) string { return fmt.Sprintf("$%d", i) },
	lock:        "SELECT pg_advisory_xact_lock(4242424242)",
	migrations:  migrations(columnTypes{serial: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", bigint: "BIGINT", bytes: "BYTEA"}),
}

func openPostgres(ctx context.Context, dsn string) (transcript.Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the DSN; say which without it.
		return nil, fmt.Errorf("transcript store %s: not a valid PostgreSQL DSN", Redact(dsn))
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	s := &sqlStore{db: db, rdb: db, d: postgres, st: newStatements(postgres)}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("transcript store %s: %w", Redact(dsn), err)
	}
	return s, nil
}
