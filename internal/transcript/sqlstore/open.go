// Package sqlstore holds Baton's transcript stores: SQLite, embedded in the operator (one file,
// the default), and PostgreSQL, for more than one replica and for scale. Both run the same SQL
// behind transcript.Store and pass the same conformance suite (package transcript/storetest).
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/baton-dev/baton/internal/transcript"
)

// Open opens the store a DSN names and brings its schema up to date:
//
//   - a path, or sqlite:///path/to/transcript.db: SQLite, embedded (the file is created);
//   - postgres://user@host:5432/db?sslmode=require (or postgresql://): PostgreSQL. A password
//     left out of the DSN is read from the PGPASSWORD environment variable or a pgpass file,
//     so that it can come from a Secret without being in the flag.
func Open(ctx context.Context, dsn string) (transcript.Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite://"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite://"))
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("transcript store %s: not a path, sqlite:// or postgres:// DSN", Redact(dsn))
	case dsn == "":
		return nil, errors.New("transcript store: no DSN")
	}
	return openSQLite(ctx, dsn)
}

// Redact is a DSN fit for logs: without its password.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if i := strings.Index(dsn, "password="); i >= 0 {
			return dsn[:i] + "password=xxxxx"
		}
		return dsn
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
