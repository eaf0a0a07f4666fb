package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/baton-dev/baton/internal/outbox"
)

var _ outbox.Store = (*sqlStore)(nil)

// Put stores each entry unless its event is stored for its sink already.
func (s *sqlStore) Put(ctx context.Context, entries ...outbox.Entry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	p := s.d.placeholder
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	stmt := fmt.Sprintf(`INSERT INTO outbox (namespace, config, sink, run_uid, event_id, body, written_ns, next_ns)
		VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING`, p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8))
	stored := 0
	for _, e := range entries {
		res, err := tx.ExecContext(ctx, stmt, e.Namespace, e.Config, e.Sink, e.RunUID, e.EventID, e.Body, e.Written.UnixNano(), e.NextTry.UnixNano())
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err == nil {
			stored += int(n)
		}
	}
	return stored, tx.Commit()
}

const outboxColumns = "seq, namespace, config, sink, run_uid, event_id, body, written_ns, next_ns, attempts, last_error"

// Due is the oldest pending entry of each run and sink, when it is due.
func (s *sqlStore) Due(ctx context.Context, now time.Time, limit int) ([]outbox.Entry, error) {
	p := s.d.placeholder
	rows, err := s.rdb.QueryContext(ctx, fmt.Sprintf(`SELECT %s FROM outbox o WHERE o.done_ns = 0 AND o.next_ns <= %s
		AND o.seq = (SELECT MIN(f.seq) FROM outbox f WHERE f.done_ns = 0 AND f.run_uid = o.run_uid
			AND f.namespace = o.namespace AND f.config = o.config AND f.sink = o.sink)
		ORDER BY o.seq LIMIT %s`, strings.ReplaceAll(outboxColumns, "seq", "o.seq"), p(1), p(2)), now.UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []outbox.Entry
	for rows.Next() {
		var e outbox.Entry
		var written, next int64
		if err := rows.Scan(&e.Seq, &e.Namespace, &e.Config, &e.Sink, &e.RunUID, &e.EventID, &e.Body, &written, &next, &e.Attempts, &e.LastError); err != nil {
			return nil, err
		}
		e.Written, e.NextTry = time.Unix(0, written), time.Unix(0, next)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *sqlStore) Delivered(ctx context.Context, seq int64, at time.Time, givenUp bool) error {
	p := s.d.placeholder
	up := 0
	if givenUp {
		up = 1
	}
	_, err := s.db.ExecContext(ctx, fmt.Sprintf("UPDATE outbox SET done_ns = %s, given_up = %s WHERE seq = %s", p(1), p(2), p(3)), max(at.UnixNano(), 1), up, seq)
	return err
}

func (s *sqlStore) Failed(ctx context.Context, seq int64, attempts int, next time.Time, lastError string) error {
	p := s.d.placeholder
	_, err := s.db.ExecContext(ctx, fmt.Sprintf("UPDATE outbox SET attempts = %s, next_ns = %s, last_error = %s WHERE seq = %s", p(1), p(2), p(3), p(4)),
		attempts, next.UnixNano(), lastError, seq)
	return err
}

func (s *sqlStore) Counts(ctx context.Context) (map[[3]string]outbox.Counts, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT namespace, config, sink,
		SUM(CASE WHEN done_ns > 0 AND given_up = 0 THEN 1 ELSE 0 END),
		SUM(CASE WHEN done_ns = 0 AND attempts > 0 THEN 1 ELSE 0 END),
		SUM(CASE WHEN done_ns > 0 AND given_up = 1 THEN 1 ELSE 0 END)
		FROM outbox GROUP BY namespace, config, sink`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[[3]string]outbox.Counts{}
	for rows.Next() {
		var k [3]string
		var c outbox.Counts
		if err := rows.Scan(&k[0], &k[1], &k[2], &c.Sent, &c.Retrying, &c.GivenUp); err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, rows.Err()
}

func (s *sqlStore) Purge(ctx context.Context, before time.Time) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM outbox WHERE done_ns > 0 AND done_ns < "+s.d.placeholder(1), before.UnixNano())
	return err
}
