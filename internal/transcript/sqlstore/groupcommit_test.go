package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// Steps of many runs that end at once are each stored once, with a sequence number of their
// own, and an append of a key stored already, in the same group, gets the record stored: what
// the appends committed together say is what appends one after another would.
func TestAppendsThatComeTogetherAreEachStored(t *testing.T) {
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const runs = 200
	record := func(i int, body string) transcript.Record {
		return transcript.Record{RunUID: fmt.Sprintf("uid-%d", i), Namespace: "ns", Run: fmt.Sprintf("run-%d", i),
			Key: transcript.Key{Kind: transcript.KindStep, Step: 1}, Time: time.Unix(int64(i), 0), Body: []byte(body)}
	}
	var wg sync.WaitGroup
	stored := make([][]transcript.Record, 2*runs)
	errs := make([]error, 2*runs)
	for i := range 2 * runs {
		wg.Go(func() {
			// Every run's step is appended twice at once: the second append finds it stored.
			stored[i], errs[i] = s.Append(ctx, record(i%runs, fmt.Sprintf(`{"answer":%d}`, i%runs)))
		})
	}
	wg.Wait()
	seqs := map[int64]int{}
	for i := range 2 * runs {
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		if len(stored[i]) != 1 || string(stored[i][0].Body) != fmt.Sprintf(`{"answer":%d}`, i%runs) {
			t.Fatalf("append %d returned %+v", i, stored[i])
		}
		if run, seen := seqs[stored[i][0].Seq]; seen && run != i%runs {
			t.Fatalf("runs %d and %d got the same sequence number %d", run, i%runs, stored[i][0].Seq)
		}
		seqs[stored[i][0].Seq] = i % runs
	}
	if len(seqs) != runs {
		t.Fatalf("%d records stored; want one a run, %d", len(seqs), runs)
	}
	for i := range runs {
		recs, err := s.List(ctx, transcript.Query{RunUID: fmt.Sprintf("uid-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 {
			t.Fatalf("run %d holds %d records; want 1", i, len(recs))
		}
	}
}

// An append that waits for a store closed meanwhile is told so, rather than waiting for ever.
func TestAnAppendToAClosedStoreFails(t *testing.T) {
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec := transcript.Record{RunUID: "uid", Namespace: "ns", Run: "run", Key: transcript.Key{Kind: transcript.KindStep, Step: 1}, Time: time.Unix(1, 0)}
	if _, err := s.Append(ctx, rec); err == nil {
		t.Fatal("an append to a closed store succeeded")
	}
}

// An append the database refuses fails alone: the appends committed with it are stored, and
// told so, and the refused one is not stored.
func TestAnAppendTheDatabaseRefusesFailsAlone(t *testing.T) {
	ctx := context.Background()
	s, path := openSQLite(t)
	// What the database refuses: any record of run uid-bad.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err = db.ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.run_uid = 'uid-bad'
		BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	// The database's write lock is held while the appends come, so that they wait together and
	// the refused one is committed in a group with the others.
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	const runs = 100
	errs := make([]error, runs+1)
	var wg sync.WaitGroup
	for i := range runs + 1 {
		if i == runs {
			// The others are on their way; the refused one comes last. How long they take to
			// be waiting changes what this test covers, not what it asserts.
			time.Sleep(100 * time.Millisecond)
		}
		wg.Go(func() {
			uid := fmt.Sprintf("uid-%d", i)
			if i == runs {
				uid = "uid-bad"
			}
			_, errs[i] = s.Append(ctx, transcript.Record{RunUID: uid, Namespace: "ns", Run: "run",
				Key: transcript.Key{Kind: transcript.KindStep, Step: 1}, Time: time.Unix(1, 0), Body: []byte(`{}`)})
		})
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	_ = lock.Close()
	wg.Wait()
	if errs[runs] == nil || !strings.Contains(errs[runs].Error(), "refused") {
		t.Fatalf("the refused append returned %v; want the database's refusal", errs[runs])
	}
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("append %d, committed beside the refused one: %v", i, errs[i])
		}
		recs, err := s.List(ctx, transcript.Query{RunUID: fmt.Sprintf("uid-%d", i)})
		if err != nil || len(recs) != 1 {
			t.Fatalf("run %d holds %d records (%v); want its one", i, len(recs), err)
		}
	}
	if recs, err := s.List(ctx, transcript.Query{RunUID: "uid-bad"}); err != nil || len(recs) != 0 {
		t.Fatalf("the refused run holds %d records (%v); want none", len(recs), err)
	}
}
