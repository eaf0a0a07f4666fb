package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/internal/transcript"
)

// The statements of the hot paths. SQLite parses a statement again on every call: each step's
// append made four parses (its savepoint, the record, the run's row, the savepoint's release),
// and a run's first step in this process a fifth (the read of whether it was recorded before a
// restart). So on SQLite they are prepared once per connection (openSQLite). PostgreSQL's driver caches what
// it prepares itself, and a pooler in front of it may take no named statements
// (default_query_exec_mode=simple_protocol): there they are sent as text, as before.

// statements are a store's hot statements: those that write go to the writer pool (db), the
// read to the reader pool (rdb).
type statements struct {
	insert, upsertRun, book, get statement
	// savepoint, release and rollbackTo frame each append of a group commit (SQLite only).
	savepoint, release, rollbackTo statement
}

// statement is one of the hot statements: its text, and the statement prepared once where the
// store prepares them.
type statement struct {
	text string
	stmt *sql.Stmt
}

// queryRow runs the statement in tx, for one row.
func (q statement) queryRow(ctx context.Context, tx *sql.Tx, args ...any) *sql.Row {
	if q.stmt != nil {
		return tx.StmtContext(ctx, q.stmt).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, q.text, args...)
}

// exec runs the statement in tx.
func (q statement) exec(ctx context.Context, tx *sql.Tx, args ...any) error {
	var err error
	if q.stmt != nil {
		_, err = tx.StmtContext(ctx, q.stmt).ExecContext(ctx, args...)
	} else {
		_, err = tx.ExecContext(ctx, q.text, args...)
	}
	return err
}

// queryRowIn runs the statement on db, outside a transaction, for one row.
func (q statement) queryRowIn(ctx context.Context, db *sql.DB, args ...any) *sql.Row {
	if q.stmt != nil {
		return q.stmt.QueryRowContext(ctx, args...)
	}
	return db.QueryRowContext(ctx, q.text, args...)
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

// newStatements are the dialect's hot statements, as text.
func newStatements(d dialect) *statements {
	return &statements{
		insert: statement{text: insertSQL(d)}, upsertRun: statement{text: upsertRunSQL(d)},
		book: statement{text: bookSQL(d)}, get: statement{text: getSQL(d)},
		savepoint: statement{text: "SAVEPOINT append"}, release: statement{text: "RELEASE append"},
		rollbackTo: statement{text: "ROLLBACK TO append"},
	}
}

// prepare prepares the statements once the schema is up to date: those that write on db, the
// read on rdb.
func (st *statements) prepare(ctx context.Context, db, rdb *sql.DB) error {
	for _, q := range []struct {
		db *sql.DB
		st *statement
	}{{db, &st.insert}, {db, &st.upsertRun}, {db, &st.book}, {rdb, &st.get},
		{db, &st.savepoint}, {db, &st.release}, {db, &st.rollbackTo}} {
		stmt, err := q.db.PrepareContext(ctx, q.st.text)
		if err != nil {
			return fmt.Errorf("preparing the transcript's statements: %w", err)
		}
		q.st.stmt = stmt
	}
	return nil
}

// close closes the statements prepared.
func (st *statements) close() error {
	var errs []error
	for _, q := range []statement{st.insert, st.upsertRun, st.book, st.get, st.savepoint, st.release, st.rollbackTo} {
		if q.stmt != nil {
			errs = append(errs, q.stmt.Close())
		}
	}
	return errors.Join(errs...)
}
