package steps

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/workflow"
)

// TestSlotsStartStepsInTheirTurn checks that steps beyond the bound wait in line, start in the
// order they came as slots free, and that a step given up while it waited never starts.
func TestSlotsStartStepsInTheirTurn(t *testing.T) {
	var started []int32
	s := &slots{free: 2, launch: func(f *flight) { started = append(started, f.step.Number) }}
	step := func(n int32) *flight { return &flight{step: workflow.Step{Number: n}} }
	gone := step(4)
	s.take(step(1))
	s.take(step(2))
	s.take(step(3))
	s.take(gone)
	s.take(step(5))
	if !slices.Equal(started, []int32{1, 2}) {
		t.Fatalf("started %v with two slots", started)
	}
	gone.cancel()
	s.release()
	s.release()
	if !slices.Equal(started, []int32{1, 2, 3, 5}) {
		t.Fatalf("started %v: want 3 then 5, and never 4, whose run was given up", started)
	}
	s.release()
	s.release()
	s.take(step(6))
	if !slices.Equal(started, []int32{1, 2, 3, 5, 6}) || s.free != 1 || len(s.queue) != 0 {
		t.Fatalf("started %v, %d free, %d waiting", started, s.free, len(s.queue))
	}
}

// TestCallStepTakesOneAnswer checks that a step's answer is handed on once, and that a provider
// that ignores its context past the step's deadline loses its answer, not its slot: the step
// ends timed out, and the answer that comes later is dropped.
func TestCallStepTakesOneAnswer(t *testing.T) {
	step := workflow.Step{Agent: "slow", Timeout: 50 * time.Millisecond}

	t.Run("an answer in time", func(t *testing.T) {
		var got []workflow.StepResult
		callStep(context.Background(), &step, callFunc(func(context.Context) *workflow.StepResult {
			return &workflow.StepResult{Agent: "slow", Result: workflow.Result{Output: "done"}}
		}), func(res *workflow.StepResult) { got = append(got, *res) })
		if len(got) != 1 || got[0].Output != "done" || got[0].TimedOut {
			t.Fatalf("handed on %+v, want the one answer", got)
		}
	})

	t.Run("a provider that ignores its context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), step.Timeout)
		defer cancel()
		var mu sync.Mutex
		var got []workflow.StepResult
		handed := make(chan struct{}, 2)
		release := make(chan struct{})
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			callStep(ctx, &step, callFunc(func(context.Context) *workflow.StepResult {
				<-release // long past the deadline
				return &workflow.StepResult{Agent: "slow", Result: workflow.Result{Output: "too late"}}
			}), func(res *workflow.StepResult) {
				mu.Lock()
				got = append(got, *res)
				mu.Unlock()
				handed <- struct{}{}
			})
		}()
		select {
		case <-handed:
		case <-time.After(10 * time.Second):
			t.Fatal("the step never ended though its provider ignored the deadline")
		}
		close(release)
		<-returned
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || !got[0].TimedOut || got[0].Output != "" {
			t.Fatalf("handed on %+v, want one timed-out result and the late answer dropped", got)
		}
	})
}

// callFunc is a function as a step's work.
type callFunc func(context.Context) *workflow.StepResult

func (f callFunc) call(ctx context.Context) *workflow.StepResult { return f(ctx) }
