package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/internal/transcript"
)

// spendBookedOnce checks that a record's spend is booked on its day when the record is stored, not again when the key is appended again, and stays when the run is deleted; and that
// spend booked without a record counts the same.
func spendBookedOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "spend")
	usd := transcript.Spend{Day: "2026-11-22", Currency: "USD", CostNanos: 1_500_000_000, Tokens: 1200}
	tokensOnly := transcript.Spend{Day: "2026-11-22", Tokens: 300}
	r := step("u1", 1, `{}`)
	r.Spend = []transcript.Spend{usd, tokensOnly}
	if _, err := s.Append(ctx, r); err != nil {
		t.Fatal(err)
	}
	again := step("u1", 1, `{"again":true}`)
	again.Spend = []transcript.Spend{usd}
	yesterday := step("u2", 1, `{}`)
	yesterday.Spend = []transcript.Spend{{Day: "2026-11-21", Currency: "USD", CostNanos: 250_000_000, Tokens: 50}}
	other := step("u3", 1, `{}`)
	other.Namespace = "elsewhere"
	other.Spend = []transcript.Spend{usd}
	if _, err := s.Append(ctx, again, yesterday, other); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "u1", "u2"); err != nil {
		t.Fatal(err)
	}
	// A step given up books what its calls used without a record.
	if err := s.Book(ctx, "ns", transcript.Spend{Day: "2026-11-22", Currency: "USD", CostNanos: 1, Tokens: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Spent(ctx, "ns", "2026-11")
	if err != nil {
		t.Fatal(err)
	}
	want := []transcript.Booked{
		{Day: "2026-11-21", Currency: "USD", CostNanos: 250_000_000, Tokens: 50},
		{Day: "2026-11-22", Currency: "", Tokens: 300},
		{Day: "2026-11-22", Currency: "USD", CostNanos: 1_500_000_001, Tokens: 1202},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("booked (-want +got):\n%s", d)
	}
	if other, err := s.Spent(ctx, "ns", "2026-10"); err != nil || len(other) != 0 {
		t.Fatalf("another month: %+v %v", other, err)
	}
	bad := step("u4", 1, `{}`)
	bad.Spend = []transcript.Spend{{Day: "today", Tokens: 1}}
	if _, err := s.Append(ctx, bad); err == nil {
		t.Fatal("a spend with no day was booked")
	}
}

// racingSpend checks that many writers booking on one namespace's day at once lose nothing.
func racingSpend(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "racespend")
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r := step(fmt.Sprintf("w%d", w), int32(i+1), `{}`)
				r.Spend = []transcript.Spend{{Day: "2026-11-22", Currency: "USD", CostNanos: 7, Tokens: 3}}
				if _, err := s.Append(ctx, r); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := s.Spent(ctx, "ns", "2026-11")
	if err != nil {
		t.Fatal(err)
	}
	want := []transcript.Booked{{Day: "2026-11-22", Currency: "USD", CostNanos: 7 * writers * each, Tokens: 3 * writers * each}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("booked (-want +got):\n%s", d)
	}
}

// namespaceBytes checks that what a namespace's records take is counted as they are stored,
// once per record, and freed when their runs are deleted.
func namespaceBytes(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, "bytes")
	a, b := step("u1", 1, `{"a":"0123456789"}`), step("u2", 1, `{"b":1}`)
	elsewhere := step("u3", 1, `{"c":"long enough to notice"}`)
	elsewhere.Namespace = "elsewhere"
	if _, err := s.Append(ctx, a, b, elsewhere); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, step("u1", 1, `{"a":"a longer body, not stored"}`)); err != nil {
		t.Fatal(err)
	}
	n, err := s.NamespaceBytes(ctx, "ns")
	if err != nil || n != int64(len(a.Body)+len(b.Body)) {
		t.Fatalf("namespace bytes %d (%v), want %d", n, err, len(a.Body)+len(b.Body))
	}
	if err := s.Delete(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if n, err = s.NamespaceBytes(ctx, "ns"); err != nil || n != int64(len(b.Body)) {
		t.Fatalf("after deleting a run: %d (%v), want %d", n, err, len(b.Body))
	}
}
