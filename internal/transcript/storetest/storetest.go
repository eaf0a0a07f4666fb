// Package storetest is the conformance suite every transcript store passes: the same cases, run
// against SQLite and against a real PostgreSQL server.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/baton-dev/baton/internal/transcript"
)

// Opener opens a store; each call on one name opens the same database, so a case can close a
// store and open it again. Each case gets names of its own.
type Opener func(t *testing.T, name string) transcript.Store

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func step(uid string, n int32, body string) transcript.Record {
	return transcript.Record{Key: transcript.Key{Kind: transcript.KindStep, Step: n}, RunUID: uid, Namespace: "ns", Run: "run-" + uid,
		Time: t0.Add(time.Duration(n) * time.Second), Body: json.RawMessage(body)}
}

func keys(rs []transcript.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s/%d/%d/%d", r.Kind, r.Step, r.Attempt, r.Call)
	}
	return out
}

// Run runs every case against the stores open makes, the cases at once: each opens stores of
// names of its own, and open must be safe to call from several tests.
func Run(t *testing.T, open Opener) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open)
		})
	}
}

// cases are the suite's cases, each a function of its own.
var cases = []struct {
	name string
	run  func(t *testing.T, open Opener)
}{
	{"records come back in the order they were appended", appendOrder},
	{"a key is stored once and its first body stands", keyStoredOnce},
	{"writers racing on one key agree on what it holds", racingWriters},
	{"get finds a key and says when there is none", getByKey},
	{"list filters by step, kind and position, and gives the newest", listFilters},
	{"runs are listed by namespace and deleted whole", runsByNamespace},
	{"records survive closing and the schema is migrated once", survivesClose},
	{"large bodies are kept whole and bad records refused", largeBodies},
	{"spend is booked once, with its record, and outlives the run", spendBookedOnce},
	{"writers racing on one namespace's ledger lose no spend", racingSpend},
	{"a namespace's records' bytes are counted and freed with their runs", namespaceBytes},
	{"the outbox delivers each run and sink in order, an event once", outboxOrder},
}

// appendOrder checks that records come back in the order they were appended.
func appendOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "order")
	in := []transcript.Record{step("u1", 1, `{"a":1}`), step("u1", 2, `{"a":2}`)}
	got, err := s.Append(ctx, in...)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Seq == 0 || got[1].Seq <= got[0].Seq {
		t.Fatalf("sequence numbers %d, %d", got[0].Seq, got[1].Seq)
	}
	d := transcript.Record{Key: transcript.Key{Kind: transcript.KindDecision, Step: 2, Call: 1}, RunUID: "u1", Namespace: "ns", Run: "run-u1", Time: t0, Body: json.RawMessage(`{"by":"alice"}`)}
	if _, err := s.Append(ctx, d, step("u1", 3, `{"a":3}`), step("u2", 1, `{}`)); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, transcript.Query{RunUID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"step/1/0/0", "step/2/0/0", "decision/2/0/1", "step/3/0/0"}, keys(all)); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	want := in[0]
	want.Seq = got[0].Seq
	if diff := cmp.Diff(want, all[0], cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("first record (-want +got):\n%s", diff)
	}
}

// keyStoredOnce checks that a key is stored once and its first body stands.
func keyStoredOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "once")
	first, err := s.Append(ctx, step("u1", 1, `{"output":"first"}`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctx, step("u1", 1, `{"output":"second"}`), step("u1", 2, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(again[0].Body) != `{"output":"first"}` || again[0].Seq != first[0].Seq {
		t.Fatalf("the second append of a key returned %s (seq %d)", again[0].Body, again[0].Seq)
	}
	all, _ := s.List(ctx, transcript.Query{RunUID: "u1"})
	if len(all) != 2 {
		t.Fatalf("want 2 records, got %d", len(all))
	}
}

// racingWriters checks that writers racing on one key agree on what it holds.
func racingWriters(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "race")
	const writers = 8
	bodies := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			got, err := s.Append(ctx, step("u1", 7, fmt.Sprintf(`{"writer":%d}`, i)))
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = string(got[0].Body)
		})
	}
	wg.Wait()
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("writers saw different records: %v", bodies)
		}
	}
}

// getByKey checks that get finds a key and says when there is none.
func getByKey(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "get")
	if _, err := s.Append(ctx, step("u1", 1, `{"x":true}`)); err != nil {
		t.Fatal(err)
	}
	r, ok, err := s.Get(ctx, "u1", transcript.Key{Kind: transcript.KindStep, Step: 1})
	if err != nil || !ok || string(r.Body) != `{"x":true}` || !r.Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("get: %+v %v %v", r, ok, err)
	}
	if _, ok, err := s.Get(ctx, "u1", transcript.Key{Kind: transcript.KindStep, Step: 2}); ok || err != nil {
		t.Fatalf("get of a missing key: %v %v", ok, err)
	}
}

// listFilters checks that list filters by step, kind and position, and gives the newest.
func listFilters(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "list")
	var rs []transcript.Record
	for n := int32(1); n <= 10; n++ {
		rs = append(rs, step("u1", n, `{}`))
		rs = append(rs, transcript.Record{Key: transcript.Key{Kind: transcript.KindTool, Step: n, Attempt: 1, Call: 1}, RunUID: "u1", Time: t0})
	}
	stored, err := s.Append(ctx, rs...)
	if err != nil {
		t.Fatal(err)
	}
	five := int32(5)
	cases := map[string]struct {
		q    transcript.Query
		want []string
	}{
		"one step":         {transcript.Query{Step: &five}, []string{"step/5/0/0", "tool/5/1/1"}},
		"one kind, newest": {transcript.Query{Kinds: []transcript.Kind{transcript.KindStep}, Limit: 2, Newest: true}, []string{"step/9/0/0", "step/10/0/0"}},
		"after a position": {transcript.Query{After: stored[15].Seq}, []string{"step/9/0/0", "tool/9/1/1", "step/10/0/0", "tool/10/1/1"}},
		"first few":        {transcript.Query{Limit: 3}, []string{"step/1/0/0", "tool/1/1/1", "step/2/0/0"}},
		// Each body is {} (2 bytes): the page ends with the record that reaches the bound.
		"a page of bytes":          {transcript.Query{Kinds: []transcript.Kind{transcript.KindStep}, MaxBytes: 5}, []string{"step/1/0/0", "step/2/0/0", "step/3/0/0"}},
		"one record at least":      {transcript.Query{Step: &five, MaxBytes: 1}, []string{"step/5/0/0"}},
		"newest before a position": {transcript.Query{Kinds: []transcript.Kind{transcript.KindStep}, Newest: true, Limit: 2, Before: stored[16].Seq}, []string{"step/7/0/0", "step/8/0/0"}},
		"the newest bytes":         {transcript.Query{Kinds: []transcript.Kind{transcript.KindStep}, Newest: true, MaxBytes: 4}, []string{"step/9/0/0", "step/10/0/0"}},
	}
	for name, tc := range cases {
		tc.q.RunUID = "u1"
		got, err := s.List(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, keys(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// runsByNamespace checks that runs are listed by namespace and deleted whole.
func runsByNamespace(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "runs")
	other := step("u3", 1, `{}`)
	other.Namespace = "other"
	if _, err := s.Append(ctx, step("u1", 1, `{}`), step("u1", 2, `{}`), step("u2", 1, `{}`), other); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	want := []transcript.RunRef{{RunUID: "u1", Namespace: "ns", Run: "run-u1", Last: t0.Add(2 * time.Second)},
		{RunUID: "u2", Namespace: "ns", Run: "run-u2", Last: t0.Add(time.Second)}}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
	if err := s.Delete(ctx, "u1", "u3", "unknown"); err != nil {
		t.Fatal(err)
	}
	all, _ := s.Runs(ctx, "")
	if len(all) != 1 || all[0].RunUID != "u2" {
		t.Fatalf("after delete: %+v", all)
	}
}

// survivesClose checks that records survive closing and the schema is migrated once.
func survivesClose(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "reopen")
	if _, err := s.Append(ctx, step("u1", 1, `{"kept":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, "reopen")
	got, err := s.List(ctx, transcript.Query{RunUID: "u1"})
	if err != nil || len(got) != 1 || string(got[0].Body) != `{"kept":true}` {
		t.Fatalf("after reopening: %v %v", got, err)
	}
}

// largeBodies checks that large bodies are kept whole and bad records refused.
func largeBodies(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "bodies")
	big := `{"output":"` + strings.Repeat("🙂<&>", 100_000) + `"}`
	if _, err := s.Append(ctx, step("u1", 1, big)); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Get(ctx, "u1", transcript.Key{Kind: transcript.KindStep, Step: 1})
	if err != nil || string(got.Body) != big {
		t.Fatalf("a %d-byte body came back as %d bytes (%v)", len(big), len(got.Body), err)
	}
	for name, r := range map[string]transcript.Record{
		"no run":   {Key: transcript.Key{Kind: transcript.KindStep, Step: 1}},
		"no kind":  {RunUID: "u1"},
		"not JSON": step("u1", 2, `{"unclosed"`),
		"too big":  step("u1", 3, `"`+strings.Repeat("x", transcript.MaxBody)+`"`),
	} {
		if _, err := s.Append(ctx, step("u1", 9, `{}`), r); !errors.Is(err, transcript.ErrBadRecord) {
			t.Errorf("%s: want ErrBadRecord, got %v", name, err)
		}
	}
	if _, ok, _ := s.Get(ctx, "u1", transcript.Key{Kind: transcript.KindStep, Step: 9}); ok {
		t.Errorf("a batch with a bad record was stored in part")
	}
}
