package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-dev/baton/internal/transcript"
)

// dialect is what differs between the SQL databases a store runs on.
type dialect struct {
	// name is the database's name, for messages.
	name string
	// placeholder is the i-th (from 1) statement parameter.
	placeholder func(i int) string
	// migrations bring the schema from version i to i+1; the schema version is their count.
	migrations []string
	// lock serializes migrations of replicas that start at once, inside the transaction.
	lock string
	// greatest is the SQL function of the larger of two values.
	greatest string
}

// sqlStore is a transcript.Store over database/sql: the SQL is the same on every database but for the
// dialect's parts.
type sqlStore struct {
	// db writes; reads go to rdb, which is db itself where the database takes concurrent
	// writers (PostgreSQL), and a pool of its own where it does not (SQLite).
	db, rdb *sql.DB
	d       dialect
	// group commits appends that come together in one transaction, where the database takes
	// one writer (SQLite; groupcommit.go); nil where it takes many.
	group *committer
	// st are the statements of the hot paths, prepared once where the database parses each
	// anew (SQLite; statements.go).
	st *statements
	// checkpoints copies the log into the database off the commit path, where the database
	// keeps a write-ahead log (SQLite; checkpoint.go); nil elsewhere.
	checkpoints *checkpointer
}

const recordColumns = "seq, run_uid, namespace, run, kind, step, attempt, call, time_ns, body"

// columnTypes are a database's names for the schema's column types.
type columnTypes struct {
	// serial is an increasing primary key the database assigns.
	serial string
	// bigint holds nanoseconds; bytes holds a record's body.
	bigint, bytes string
}

// migrations are the schema's versions, the same on every database but for the column types.
func migrations(t columnTypes) []string {
	return []string{
		`CREATE TABLE records (
			seq ` + t.serial + `,
			run_uid TEXT NOT NULL,
			namespace TEXT NOT NULL,
			run TEXT NOT NULL,
			kind TEXT NOT NULL,
			step INTEGER NOT NULL,
			attempt INTEGER NOT NULL,
			call INTEGER NOT NULL,
			time_ns ` + t.bigint + ` NOT NULL,
			body ` + t.bytes + ` NOT NULL,
			UNIQUE (run_uid, kind, step, attempt, call)
		);
		CREATE INDEX records_run ON records (run_uid, seq);
		CREATE INDEX records_namespace ON records (namespace, run_uid);`,
		// The runs held, for the deletion sweep, without scanning records.
		`CREATE TABLE runs (
			run_uid TEXT PRIMARY KEY,
			namespace TEXT NOT NULL,
			run TEXT NOT NULL,
			last_ns ` + t.bigint + ` NOT NULL
		);
		INSERT INTO runs (run_uid, namespace, run, last_ns)
			SELECT run_uid, namespace, run, MAX(time_ns) FROM records GROUP BY run_uid, namespace, run;
		CREATE INDEX runs_namespace ON runs (namespace, run);`,
		// The ledger: what each namespace's model calls used, by UTC day (a month is the sum of
		// its days), booked with the records they precede and kept when runs are deleted; and
		// what each run's records take, for the namespace's transcript budget.
		`CREATE TABLE spend (
			namespace TEXT NOT NULL,
			period TEXT NOT NULL,
			currency TEXT NOT NULL,
			cost_nanos ` + t.bigint + ` NOT NULL,
			tokens ` + t.bigint + ` NOT NULL,
			PRIMARY KEY (namespace, period, currency)
		);
		ALTER TABLE runs ADD COLUMN bytes ` + t.bigint + ` NOT NULL DEFAULT 0;
		UPDATE runs SET bytes = (SELECT COALESCE(SUM(LENGTH(body)), 0) FROM records WHERE records.run_uid = runs.run_uid);`,
		// The outbox of notifications: an entry per event and sink, kept apart from the runs'
		// records (internal/outbox). done_ns is 0 while the entry waits to be delivered; given_up is 1
		// for an entry its sink never took.
		`CREATE TABLE outbox (
			seq ` + t.serial + `,
			namespace TEXT NOT NULL,
			config TEXT NOT NULL,
			sink TEXT NOT NULL,
			run_uid TEXT NOT NULL,
			event_id TEXT NOT NULL,
			body ` + t.bytes + ` NOT NULL,
			written_ns ` + t.bigint + ` NOT NULL,
			next_ns ` + t.bigint + ` NOT NULL,
			attempts INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '',
			done_ns ` + t.bigint + ` NOT NULL DEFAULT 0,
			given_up INTEGER NOT NULL DEFAULT 0,
			UNIQUE (namespace, config, sink, event_id)
		);
		CREATE INDEX outbox_pending ON outbox (done_ns, run_uid, namespace, config, sink, seq);`,
		// Records are read and deleted by run, never by namespace (the runs table answers that):
		// the namespace's index only cost each append a page of its own.
		`DROP INDEX IF EXISTS records_namespace;`,
	}
}

// migrate brings the schema up to date: versioned, in one transaction, idempotent.
func (s *sqlStore) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if s.d.lock != "" {
		if _, err := tx.ExecContext(ctx, s.d.lock); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS baton_schema (version INTEGER NOT NULL)"); err != nil {
		return err
	}
	version := 0
	err = tx.QueryRowContext(ctx, "SELECT version FROM baton_schema").Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, "INSERT INTO baton_schema (version) VALUES (0)"); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > len(s.d.migrations) {
		return fmt.Errorf("the transcript schema is at version %d, newer than this operator knows (%d): run a newer operator", version, len(s.d.migrations))
	}
	for v := version; v < len(s.d.migrations); v++ {
		if _, err := tx.ExecContext(ctx, s.d.migrations[v]); err != nil {
			return fmt.Errorf("migrating the transcript schema to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE baton_schema SET version = "+s.d.placeholder(1), len(s.d.migrations)); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqlStore) Append(ctx context.Context, records ...transcript.Record) ([]transcript.Record, error) {
	for _, r := range records {
		if err := transcript.CheckRecord(r); err != nil {
			return nil, err
		}
	}
	if s.group != nil {
		return s.group.append(ctx, records)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	out, err := s.appendIn(ctx, tx, records)
	if err != nil {
		return nil, err
	}
	return out, tx.Commit()
}

// appendIn stores the records in tx: each key once (a key stored already stands, and is
// returned as stored), its spend booked, and the runs table told of each run's newest record.
func (s *sqlStore) appendIn(ctx context.Context, tx *sql.Tx, records []transcript.Record) ([]transcript.Record, error) {
	out := make([]transcript.Record, 0, len(records))
	// What each run's new records take, and its newest record.
	added := map[string]int64{}
	last := map[string]transcript.Record{}
	for _, r := range records {
		if len(r.Body) == 0 {
			r.Body = []byte("{}")
		}
		spend := r.Spend
		err := s.st.insert.queryRow(ctx, tx, r.RunUID, r.Namespace, r.Run, string(r.Kind), r.Step, r.Attempt, r.Call,
			r.Time.UnixNano(), []byte(r.Body)).Scan(&r.Seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// The key was stored already: what is stored stands, and its spend was booked.
			r, err = s.get(ctx, tx, r.RunUID, r.Key)
		case err == nil:
			added[r.RunUID] += int64(len(r.Body))
			err = s.book(ctx, tx, r.Namespace, spend)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if l, ok := last[r.RunUID]; !ok || r.Time.After(l.Time) {
			last[r.RunUID] = r
		}
	}
	// The runs table lists the runs held, for the deletion sweep, without scanning records.
	for uid, r := range last {
		if err := s.st.upsertRun.exec(ctx, tx, uid, r.Namespace, r.Run, r.Time.UnixNano(), added[uid]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// book adds spend to the namespace's ledger, on its day, in the transaction of the record it goes
// with.
func (s *sqlStore) book(ctx context.Context, tx *sql.Tx, namespace string, spend []transcript.Spend) error {
	if len(spend) == 0 {
		return nil
	}
	for _, sp := range spend {
		if err := s.st.book.exec(ctx, tx, namespace, sp.Day, sp.Currency, min(sp.CostNanos, transcript.MaxSpend), min(sp.Tokens, transcript.MaxSpend)); err != nil {
			return fmt.Errorf("booking spend in the ledger: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) Book(ctx context.Context, namespace string, spend ...transcript.Spend) error {
	if err := transcript.CheckRecord(transcript.Record{RunUID: "-", Key: transcript.Key{Kind: "-"}, Spend: spend}); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.book(ctx, tx, namespace, spend); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqlStore) Spent(ctx context.Context, namespace, month string) ([]transcript.Booked, error) {
	p := s.d.placeholder
	// A day's period is ten characters, 2006-01-02: the pattern takes the month's days alone.
	rows, err := s.rdb.QueryContext(ctx, fmt.Sprintf(`SELECT period, currency, cost_nanos, tokens FROM spend
		WHERE namespace = %s AND period LIKE %s ORDER BY period, currency`, p(1), p(2)), namespace, month+"-__")
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []transcript.Booked
	for rows.Next() {
		var b transcript.Booked
		if err := rows.Scan(&b.Day, &b.Currency, &b.CostNanos, &b.Tokens); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func (s *sqlStore) NamespaceBytes(ctx context.Context, namespace string) (int64, error) {
	var n int64
	err := s.rdb.QueryRowContext(ctx, "SELECT COALESCE(SUM(bytes), 0) FROM runs WHERE namespace = "+s.d.placeholder(1), namespace).Scan(&n)
	return n, err
}

func (s *sqlStore) Get(ctx context.Context, runUID string, key transcript.Key) (transcript.Record, bool, error) {
	r, err := scanRecord(s.st.get.queryRowIn(ctx, s.rdb, runUID, string(key.Kind), key.Step, key.Attempt, key.Call))
	if errors.Is(err, sql.ErrNoRows) {
		return transcript.Record{}, false, nil
	}
	return r, err == nil, err
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *sqlStore) get(ctx context.Context, q queryer, runUID string, key transcript.Key) (transcript.Record, error) {
	return scanRecord(q.QueryRowContext(ctx, s.st.get.text, runUID, string(key.Kind), key.Step, key.Attempt, key.Call))
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (transcript.Record, error) {
	var r transcript.Record
	var kind string
	var nanos int64
	var body []byte
	if err := row.Scan(&r.Seq, &r.RunUID, &r.Namespace, &r.Run, &kind, &r.Step, &r.Attempt, &r.Call, &nanos, &body); err != nil {
		return transcript.Record{}, err
	}
	r.Kind, r.Time, r.Body = transcript.Kind(kind), time.Unix(0, nanos).UTC(), body
	return r, nil
}

func (s *sqlStore) List(ctx context.Context, q transcript.Query) ([]transcript.Record, error) {
	p := s.d.placeholder
	var where strings.Builder
	args := []any{q.RunUID, q.After}
	fmt.Fprintf(&where, "run_uid = %s AND seq > %s", p(1), p(2))
	if q.Before > 0 {
		args = append(args, q.Before)
		fmt.Fprintf(&where, " AND seq < %s", p(len(args)))
	}
	if q.Step != nil {
		args = append(args, *q.Step)
		fmt.Fprintf(&where, " AND step = %s", p(len(args)))
	}
	if len(q.Kinds) > 0 {
		marks := make([]string, len(q.Kinds))
		for i, k := range q.Kinds {
			args = append(args, string(k))
			marks[i] = p(len(args))
		}
		fmt.Fprintf(&where, " AND kind IN (%s)", strings.Join(marks, ", "))
	}
	order := "ASC"
	if q.Newest {
		order = "DESC"
	}
	stmt := fmt.Sprintf("SELECT %s FROM records WHERE %s ORDER BY seq %s", recordColumns, where.String(), order)
	if q.Limit > 0 {
		args = append(args, q.Limit)
		stmt += " LIMIT " + p(len(args))
	}
	rows, err := s.rdb.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []transcript.Record
	size := 0
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if size += len(r.Body); q.MaxBytes > 0 && size >= q.MaxBytes {
			// The rows not read are not sent: the database streams them.
			break
		}
	}
	if q.Newest {
		slices.Reverse(out)
	}
	return out, rows.Err()
}

func (s *sqlStore) Runs(ctx context.Context, namespace string) ([]transcript.RunRef, error) {
	stmt := "SELECT run_uid, namespace, run, last_ns FROM runs"
	var args []any
	if namespace != "" {
		stmt += " WHERE namespace = " + s.d.placeholder(1)
		args = append(args, namespace)
	}
	stmt += " ORDER BY namespace, run, run_uid"
	rows, err := s.rdb.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []transcript.RunRef
	for rows.Next() {
		var r transcript.RunRef
		var nanos int64
		if err := rows.Scan(&r.RunUID, &r.Namespace, &r.Run, &nanos); err != nil {
			return nil, err
		}
		r.Last = time.Unix(0, nanos).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// deleteBatch bounds the runs one DELETE names.
const deleteBatch = 200

func (s *sqlStore) Delete(ctx context.Context, runUIDs ...string) error {
	for start := 0; start < len(runUIDs); start += deleteBatch {
		batch := runUIDs[start:min(start+deleteBatch, len(runUIDs))]
		marks := make([]string, len(batch))
		args := make([]any, len(batch))
		for i, uid := range batch {
			marks[i], args[i] = s.d.placeholder(i+1), uid
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, table := range []string{"records", "runs"} {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE run_uid IN ("+strings.Join(marks, ", ")+")", args...); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func (s *sqlStore) Close() error {
	if s.group != nil {
		s.group.close()
	}
	if s.st != nil {
		_ = s.st.close()
	}
	if s.checkpoints != nil {
		_ = s.checkpoints.close()
	}
	if s.rdb != s.db {
		_ = s.rdb.Close()
	}
	return s.db.Close()
}
