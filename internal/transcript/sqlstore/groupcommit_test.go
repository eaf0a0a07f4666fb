package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
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
