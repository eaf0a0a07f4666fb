package steps

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/pacing"
	"github.com/baton-dev/baton/internal/transcript"
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

// TestAStepGivenUpGivesBackItsEndpointsCapacity checks that a step admitted by its endpoint
// and given up before it made its call (its run ended while it waited for a slot) hands the
// capacity back: the endpoint's one call at a time is free again for the next step.
func TestAStepGivenUpGivesBackItsEndpointsCapacity(t *testing.T) {
	pacer := pacing.New(nil)
	endpoint := pacer.Endpoint(pacing.Key{Kind: "ModelEndpoint", Namespace: "team", Name: "llm"}, pacing.Limits{MaxConcurrent: 1})
	s := New(Config{MaxInFlight: 1})
	s.slots.free = 0 // every slot is taken: the step waits for one once its endpoint admits it
	on := paced{endpoint: endpoint, key: pacing.Key{Name: "llm"}, ask: pacing.Ask{Namespace: "team", Run: "team/r"}, meter: &meter{}}
	f := &flight{step: workflow.Step{Number: 1}, work: pacedStep{on}}
	s.queue(f, on, false)
	if got := endpoint.Use().InFlight; got != 1 {
		t.Fatalf("the endpoint has %d calls in flight, want the step's one", got)
	}
	f.cancel()
	s.slots.release()
	if got := endpoint.Use().InFlight; got != 0 {
		t.Fatalf("the endpoint still holds %d calls for a step that was given up", got)
	}
}

// pacedStep is a step on an endpoint that is never called.
type pacedStep struct{ on paced }

func (p pacedStep) provider() string                          { return "OpenAI" }
func (p pacedStep) call(context.Context) *workflow.StepResult { return &workflow.StepResult{} }
func (p pacedStep) record(*workflow.StepResult, time.Time, time.Time) transcript.Record {
	return transcript.Record{}
}
func (p pacedStep) pace() paced        { return p.on }
func (p pacedStep) spend() *quotaMeter { return nil }
func (p pacedStep) again()             {}
