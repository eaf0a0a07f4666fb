package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/workflow"
)

// stepRunner runs agent steps outside the reconcile workers, so a slow model call never
// leaves other runs waiting. A reconcile starts a step and returns; when the step ends, the
// runner wakes the run's reconcile, which applies the result and writes the status once.
//
// Results live in memory until applied. If the operator restarts before that, the step runs
// again: the run's status only ever records applied steps.
type stepRunner struct {
	mu      sync.Mutex
	flights map[types.NamespacedName]*flight
	// wake enqueues a run whose step has ended.
	wake chan event.GenericEvent
	// slots bounds the steps in flight at once.
	slots chan struct{}
}

// flight is one step in flight, or ended and waiting to be applied.
type flight struct {
	uid    types.UID
	number int32
	agent  string
	cancel context.CancelFunc
	done   bool
	result workflow.StepResult
}

func newStepRunner(maxInFlight int) *stepRunner {
	if maxInFlight < 1 {
		maxInFlight = 1
	}
	return &stepRunner{
		flights: map[types.NamespacedName]*flight{},
		wake:    make(chan event.GenericEvent, 1024),
		slots:   make(chan struct{}, maxInFlight),
	}
}

// flightState says where the run's next step is.
type flightState int

const (
	notStarted flightState = iota
	running
	ended
)

// lookup reports the state of the run's step. A flight for any other step of the run is
// stale (the status moved on, or the run was recreated) and is dropped.
func (s *stepRunner) lookup(run *v1alpha1.AgentRun, step workflow.Step) (flightState, workflow.StepResult) {
	key := client.ObjectKeyFromObject(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.flights[key]
	switch {
	case !ok:
		return notStarted, workflow.StepResult{}
	case f.uid != run.UID || f.number != step.Number || f.agent != step.Agent:
		f.cancel()
		delete(s.flights, key)
		return notStarted, workflow.StepResult{}
	case f.done:
		return ended, f.result
	default:
		return running, workflow.StepResult{}
	}
}

// start runs do for the run's step in its own goroutine, with the step's deadline.
func (s *stepRunner) start(run *v1alpha1.AgentRun, step workflow.Step, do func(ctx context.Context) workflow.StepResult) {
	key := client.ObjectKeyFromObject(run)
	ctx, cancel := context.WithCancel(context.Background())
	f := &flight{uid: run.UID, number: step.Number, agent: step.Agent, cancel: cancel}
	s.mu.Lock()
	if old, ok := s.flights[key]; ok {
		old.cancel()
	}
	s.flights[key] = f
	s.mu.Unlock()
	stepsInFlight.Inc()

	go func() {
		defer stepsInFlight.Dec()
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		stepCtx, stop := context.WithTimeout(ctx, step.Timeout)
		began := time.Now()
		res := awaitStep(stepCtx, step, do)
		stepDuration.Observe(time.Since(began).Seconds())
		stop()
		<-s.slots

		s.mu.Lock()
		current := s.flights[key] == f
		if current {
			f.done, f.result = true, res
		}
		s.mu.Unlock()
		if !current {
			return
		}
		obj := &v1alpha1.AgentRun{}
		obj.Name, obj.Namespace = key.Name, key.Namespace
		select {
		case s.wake <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
		}
	}()
}

// awaitStep runs do and returns its result, or a timeout result at the step's deadline if do
// has not returned by then: a provider that ignores its context loses its answer, not the slot.
func awaitStep(ctx context.Context, step workflow.Step, do func(context.Context) workflow.StepResult) workflow.StepResult {
	out := make(chan workflow.StepResult, 1)
	go func() { out <- do(ctx) }()
	select {
	case res := <-out:
		return res
	case <-ctx.Done():
		select {
		case res := <-out:
			return res
		case <-time.After(time.Second):
			return workflow.StepResult{Agent: step.Agent, Input: step.Input, TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded),
				Error: fmt.Sprintf("timed out after %s", step.Timeout)}
		}
	}
}

// forget cancels and drops the run's step, if any.
func (s *stepRunner) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.flights[key]; ok {
		f.cancel()
		delete(s.flights, key)
	}
}

// consumed drops the run's step once its result is written, if it is still that step.
func (s *stepRunner) consumed(key types.NamespacedName, number int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.flights[key]; ok && f.number == number && f.done {
		delete(s.flights, key)
	}
}
