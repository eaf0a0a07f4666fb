package controllers

import (
	"context"
	"slices"
	"testing"
)

// TestSlotsStartStepsInTheirTurn checks that steps beyond the bound wait in line, start in the
// order they came as slots free, and that a step given up while it waited never starts.
func TestSlotsStartStepsInTheirTurn(t *testing.T) {
	s := &slots{free: 2}
	var started []int
	launch := func(n int) func() { return func() { started = append(started, n) } }
	ctx := context.Background()
	gone, giveUp := context.WithCancel(ctx)
	s.take(ctx, launch(1))
	s.take(ctx, launch(2))
	s.take(ctx, launch(3))
	s.take(gone, launch(4))
	s.take(ctx, launch(5))
	if !slices.Equal(started, []int{1, 2}) {
		t.Fatalf("started %v with two slots", started)
	}
	giveUp()
	s.release()
	s.release()
	if !slices.Equal(started, []int{1, 2, 3, 5}) {
		t.Fatalf("started %v: want 3 then 5, and never 4, whose run was given up", started)
	}
	s.release()
	s.release()
	s.take(ctx, launch(6))
	if !slices.Equal(started, []int{1, 2, 3, 5, 6}) || s.free != 1 || len(s.queue) != 0 {
		t.Fatalf("started %v, %d free, %d waiting", started, s.free, len(s.queue))
	}
}
