package sqlstore

import (
	"context"
	"errors"
	"sync"

	"github.com/baton-dev/baton/internal/transcript"
)

// Group commit. SQLite takes one writer: when hundreds of steps end at once, each append waited
// for the commits of all the appends before it, and the last step's next one started tens of
// milliseconds late. So the appends that wait together are written in one transaction, each in
// a savepoint of its own (one append's failure is its own), and each caller returns once that
// transaction is committed: durable as before, at one commit for the group.

// maxGroup bounds the appends committed together.
const maxGroup = 128

// errClosed is what an append gets from a store closed while it waited.
var errClosed = errors.New("the transcript store is closed")

// committer commits the appends of a store in groups, one group at a time.
type committer struct {
	s       *sqlStore
	reqs    chan *appendReq
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// appendReq is one Append waiting for its group's commit.
type appendReq struct {
	ctx     context.Context
	records []transcript.Record
	result  chan appendResult
}

type appendResult struct {
	out []transcript.Record
	err error
}

func newCommitter(s *sqlStore) *committer {
	c := &committer{s: s, reqs: make(chan *appendReq), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// append hands the records to the committer and waits for their group's commit.
func (c *committer) append(ctx context.Context, records []transcript.Record) ([]transcript.Record, error) {
	req := &appendReq{ctx: ctx, records: records, result: make(chan appendResult, 1)}
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, errClosed
	}
	select {
	case r := <-req.result:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close stops the committer once the group it commits, if any, is committed.
func (c *committer) close() {
	c.stopped.Do(func() { close(c.stop) })
	<-c.done
}

// run takes the appends waiting, up to maxGroup, and commits them together.
func (c *committer) run() {
	defer close(c.done)
	for {
		var group []*appendReq
		select {
		case req := <-c.reqs:
			group = append(group, req)
		case <-c.stop:
			return
		}
	more:
		for len(group) < maxGroup {
			select {
			case req := <-c.reqs:
				group = append(group, req)
			default:
				break more
			}
		}
		c.commit(group)
	}
}

// commit writes the group in one transaction, each append in a savepoint, and tells each its
// result once the transaction is committed. An append whose caller gave up is written all the
// same, as it would be had it begun before.
func (c *committer) commit(group []*appendReq) {
	ctx := context.Background()
	results := make([]appendResult, len(group))
	err := func() error {
		tx, err := c.s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		st := c.s.st
		for i, req := range group {
			if err := st.savepoint.exec(ctx, tx); err != nil {
				return err
			}
			out, err := c.s.appendIn(ctx, tx, req.records)
			if err != nil {
				if rbErr := st.rollbackTo.exec(ctx, tx); rbErr != nil {
					return rbErr
				}
			}
			if err := st.release.exec(ctx, tx); err != nil {
				return err
			}
			results[i] = appendResult{out: out, err: err}
		}
		return tx.Commit()
	}()
	for i, req := range group {
		if err != nil {
			results[i] = appendResult{err: err}
		}
		req.result <- results[i]
	}
}
