package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/outbox"
	"github.com/baton-dev/baton/internal/transcript"
)

func outboxOf(t *testing.T, s transcript.Store) outbox.Store {
	t.Helper()
	o, ok := s.(outbox.Store)
	if !ok {
		t.Fatalf("the store %T keeps no outbox", s)
	}
	return o
}

func entry(run, sink, id string, at time.Time) outbox.Entry {
	return outbox.Entry{Namespace: "team-a", Config: "refunds", Sink: sink, RunUID: run, EventID: id, Body: []byte(`{"id":"` + id + `"}`),
		Written: at, NextTry: at}
}

// outboxOrder checks the outbox: an event is stored once per sink, even after it was
// delivered; each run and sink is delivered in order, one entry at a time, the next only once
// the one before it was delivered or given up; a failed entry waits until it is due; deleting
// the run's records loses nothing; and delivered entries are purged.
func outboxOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "outbox")
	o := outboxOf(t, s)
	t0 := time.Unix(1795867200, 0)
	n, err := o.Put(ctx, entry("r1", "ops", "e1", t0), entry("r1", "ops", "e2", t0), entry("r1", "slack", "e1", t0), entry("r2", "ops", "e3", t0))
	if err != nil || n != 4 {
		t.Fatalf("put %d, %v", n, err)
	}
	if n, err := o.Put(ctx, entry("r1", "ops", "e1", t0)); err != nil || n != 0 {
		t.Fatalf("an event put again for its sink: stored %d, %v", n, err)
	}
	if err := s.Delete(ctx, "r1", "r2"); err != nil {
		t.Fatal(err)
	}
	due := func(at time.Time) []string {
		t.Helper()
		es, err := o.Due(ctx, at, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.Sink+"/"+e.EventID)
		}
		return ids
	}
	got := due(t0)
	if len(got) != 3 || got[0] != "ops/e1" || got[1] != "slack/e1" || got[2] != "ops/e3" {
		t.Fatalf("due %v, want the first of each run and sink", got)
	}
	es, _ := o.Due(ctx, t0, 100)
	if err := o.Failed(ctx, es[0].Seq, 1, t0.Add(time.Minute), "503 Service Unavailable"); err != nil {
		t.Fatal(err)
	}
	if got := due(t0); len(got) != 2 || got[0] != "slack/e1" {
		t.Fatalf("due %v while ops/e1 waits to be tried again: its run's e2 must wait too", got)
	}
	counts, err := o.Counts(ctx)
	if err != nil || counts[[3]string{"team-a", "refunds", "ops"}] != (outbox.Counts{Retrying: 1}) {
		t.Fatalf("counts %v, %v", counts, err)
	}
	if err := o.Delivered(ctx, es[0].Seq, t0.Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	es, _ = o.Due(ctx, t0.Add(time.Minute), 100)
	if err := o.Delivered(ctx, es[1].Seq, t0.Add(time.Minute), true); err != nil {
		t.Fatal(err)
	}
	counts, _ = o.Counts(ctx)
	if got := counts[[3]string{"team-a", "refunds", "slack"}]; got != (outbox.Counts{GivenUp: 1}) {
		t.Fatalf("slack's counts %+v after its entry was given up", got)
	}
	if got := counts[[3]string{"team-a", "refunds", "ops"}]; got != (outbox.Counts{Sent: 1}) {
		t.Fatalf("ops' counts %+v after its entry was delivered", got)
	}
	if got := due(t0.Add(time.Minute)); len(got) != 2 || got[0] != "ops/e2" {
		t.Fatalf("due %v after ops/e1 was delivered", got)
	}
	if n, _ := o.Put(ctx, entry("r1", "ops", "e1", t0)); n != 0 {
		t.Fatal("a delivered event was stored again")
	}
	if err := o.Purge(ctx, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, _ := o.Put(ctx, entry("r1", "ops", "e1", t0)); n != 1 {
		t.Fatal("a purged event was not stored again")
	}
}
