package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/internal/transcript"
)

// The statements of the hot paths, prepared once per connection. SQLite parses a statement
// again on every call otherwise: each step's append made four parses (its savepoint, the record,
// the run's row, the savepoint's release), and a run's first step in this process a fifth (the
// read of whether it was recorded before a restart). PostgreSQL's driver caches what it prepares
// itself; prepared here, the code is the same on both.

// statements are a store's prepared statements: those that write on the writer pool (db), the
// read on the reader pool (rdb).
type statements struct {
	insert, upsertRun, book, get *sql.Stmt
	// savepoint, release and rollbackTo frame each append of a group commit (SQLite only).
	savepoint, release, rollbackTo *sql.Stmt
}

// insertSQL stores a record once per key; it returns the record's sequence number, and no row
// when the key was stored already.
func insertSQL(d dialect) string {
	p := d.placeholder
	return fmt.Sprintf(`INSERT INTO records (run_uid, namespace, run, kind, step, attempt, call, time_ns, body)
		VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
		ON CONFLICT (run_uid, kind, step, attempt, call) DO NOTHING RETURNING seq`,
		p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8), p(9))
}

// upsertRunSQL tells the runs table of a run's newest record and the bytes its records added.
func upsertRunSQL(d dialect) string {
	p := d.placeholder
	return fmt.Sprintf(`INSERT INTO runs (run_uid, namespace, run, last_ns, bytes) VALUES (%s, %s, %s, %s, %s)
		ON CONFLICT (run_uid) DO UPDATE SET last_ns = %s(runs.last_ns, excluded.last_ns), bytes = runs.bytes + excluded.bytes`,
		p(1), p(2), p(3), p(4), p(5), d.greatest)
}

// bookSQL adds spend to a namespace's ledger on its day, each sum held at transcript.MaxSpend.
func bookSQL(d dialect) string {
	p := d.placeholder
	return fmt.Sprintf(`INSERT INTO spend (namespace, period, currency, cost_nanos, tokens) VALUES (%s, %s, %s, %s, %s)
		ON CONFLICT (namespace, period, currency) DO UPDATE SET
			cost_nanos = CASE WHEN spend.cost_nanos > %[6]d - excluded.cost_nanos THEN %[6]d ELSE spend.cost_nanos + excluded.cost_nanos END,
			tokens = CASE WHEN spend.tokens > %[6]d - excluded.tokens THEN %[6]d ELSE spend.tokens + excluded.tokens END`,
		p(1), p(2), p(3), p(4), p(5), transcript.MaxSpend)
}

// getSQL reads one record by its key.
func getSQL(d dialect) string {
	p := d.placeholder
	return fmt.Sprintf("SELECT %s FROM records WHERE run_uid = %s AND kind = %s AND step = %s AND attempt = %s AND call = %s",
		recordColumns, p(1), p(2), p(3), p(4), p(5))
}

// prepare prepares the store's statements, once its schema is up to date.
func (s *sqlStore) prepare(ctx context.Context) error {
	st := &statements{}
	var err error
	prep := func(db *sql.DB, query string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var stmt *sql.Stmt
		stmt, err = db.PrepareContext(ctx, query)
		return stmt
	}
	st.insert = prep(s.db, insertSQL(s.d))
	st.upsertRun = prep(s.db, upsertRunSQL(s.d))
	st.book = prep(s.db, bookSQL(s.d))
	st.get = prep(s.rdb, getSQL(s.d))
	if s.d.savepoints {
		st.savepoint = prep(s.db, "SAVEPOINT append")
		st.release = prep(s.db, "RELEASE append")
		st.rollbackTo = prep(s.db, "ROLLBACK TO append")
	}
	if err != nil {
		_ = st.close()
		return fmt.Errorf("preparing the transcript's statements: %w", err)
	}
	s.st = st
	return nil
}

// close closes the statements prepared.
func (st *statements) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{st.insert, st.upsertRun, st.book, st.get, st.savepoint, st.release, st.rollbackTo} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
