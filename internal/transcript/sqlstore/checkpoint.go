package sqlstore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// Checkpoints off the commit path. In write-ahead logging, SQLite copies the log back into the
// database (a checkpoint, with its fsync) in the commit that takes the log past 1,000 pages: one
// commit in some hundreds waited for it, and so did every step behind it. The writer's
// connection now leaves that to a checkpointer on a connection of its own, which checkpoints
// once a second without blocking the writer or the readers (PASSIVE).
//
// Only the writer starts the log again from its beginning, and only when every frame in it is
// copied. Under a steady stream of commits that is rarely so after a checkpoint from another
// connection, so the log grows to checkpointBackstop pages (about 40 MB; 8 writers appending
// 40,000 steps of 2 KiB measured 40 to 46 MB), where the writer checkpoints in its own commit
// what the checkpointer has not copied yet, at most a second's worth, and starts it again.
// Under a light load the log starts again after each checkpoint.

const (
	// checkpointEvery is how often the checkpointer copies the log into the database.
	checkpointEvery = time.Second
	// checkpointBackstop is the log's size, in pages of 4 KiB, at which the writer checkpoints
	// in its own commit.
	checkpointBackstop = 10000
)

// checkpointer checkpoints a SQLite database's log on a connection of its own.
type checkpointer struct {
	db      *sql.DB
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			// A checkpoint that cannot copy everything (a reader holds an older snapshot)
			// copies what it can; the next one goes on from there.
			_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// close stops the checkpointer and closes its connection; closing the store's last connection
// checkpoints what is left.
func (c *checkpointer) close() error {
	c.stopped.Do(func() { close(c.stop) })
	<-c.done
	return c.db.Close()
}
