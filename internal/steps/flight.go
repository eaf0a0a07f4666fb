package steps

// A step's flight: the slot it waits for or holds, the contexts of its call and its record, and
// what it is doing now. The Runner keeps one flight a run (runner.go).

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/pacing"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// slots bounds the steps running at once. A step that finds no slot waits in line, first come
// first served, and is launched when a slot frees.
type slots struct {
	mu     sync.Mutex
	free   int
	queue  []*flight
	launch func(*flight)
}

// take launches f now if a slot is free, else when one frees, unless it is given up first.
func (s *slots) take(f *flight) {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		s.launch(f)
		return
	}
	if len(s.queue) >= 1024 && len(s.queue)%1024 == 0 {
		// Steps given up while they waited (their runs ended) leave the line.
		kept := s.queue[:0]
		for _, w := range s.queue {
			if !w.givenUp() {
				kept = append(kept, w)
			} else {
				w.leave()
			}
		}
		clear(s.queue[len(kept):])
		s.queue = kept
	}
	s.queue = append(s.queue, f)
	s.mu.Unlock()
}

// release gives the slot to the first step in line that still wants it, or frees it.
func (s *slots) release() {
	s.mu.Lock()
	for len(s.queue) > 0 {
		f := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if !f.givenUp() {
			s.mu.Unlock()
			s.launch(f)
			return
		}
		f.leave() // a step given up while it waited
	}
	s.free++
	s.mu.Unlock()
}

// flight is one step in flight, or ended and waiting to be applied. It is what the runner keeps
// of a step: one waiting for a slot holds this and its work, one waiting on its agent also its
// context and its goroutine.
type flight struct {
	step workflow.Step
	work stepWork
	// key and uid name the run, for a step that outlives it.
	key types.NamespacedName
	uid types.UID

	// mu guards stopped and stop: cancel may come before the step has a context, while it
	// runs, or while its record is written. stop ends the context of what the step does now.
	mu      sync.Mutex
	stopped bool
	stop    context.CancelFunc

	// done and result are the runTable's, under its lock.
	done   bool
	result *workflow.StepResult

	// waiting, under mu, is set while the step waits in its endpoint's line, with what gives
	// its place up; since is when it began to wait.
	waiting    *pacing.Key
	since      time.Time
	cancelWait func() bool
}

// pacedWork is the work of a step on a shared endpoint: it waits for the endpoint's capacity
// before it has a slot.
type pacedWork interface {
	pace() paced
	// again readies the work to be done again, from the start.
	again()
}

// cancel gives the step up: one waiting for a slot never starts, a running one's context ends.
func (f *flight) cancel() {
	f.mu.Lock()
	f.stopped = true
	stop, cancelWait := f.stop, f.cancelWait
	f.cancelWait = nil
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
	if cancelWait != nil && cancelWait() {
		// Given up in its endpoint's line: it never had a slot.
		f.leave()
	}
}

// leave is the end of a step in the runner, whichever way it ends: it no longer counts in
// flight, and capacity its endpoint granted it for a call it never made goes back.
func (f *flight) leave() {
	metrics.StepsInFlight.Dec()
	if p, ok := f.work.(pacedWork); ok {
		if on := p.pace(); on.meter != nil {
			on.meter.release()
		}
	}
}

// waitingFor says which endpoint the step waits for, and since when.
func (f *flight) waitingFor() (pacing.Key, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting == nil {
		return pacing.Key{}, time.Time{}, false
	}
	return *f.waiting, f.since, true
}

func (f *flight) givenUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

// begin gives the step, which has a slot now, the context of its call, with the step's
// deadline; false if the step was given up meanwhile.
func (f *flight) begin() (context.Context, bool) {
	return f.next(func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), f.step.Timeout)
	})
}

// recording ends the step's call and gives the writing of its record a context of its own,
// without the step's deadline: a step that ran out of time is recorded too. false if the step
// was given up.
func (f *flight) recording() (context.Context, bool) {
	return f.next(func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) })
}

// next ends the step's context, if it has one, and gives it another, unless it was given up.
// The two contexts have no parent in common: a step keeps one, not a chain.
func (f *flight) next(newContext func() (context.Context, context.CancelFunc)) (context.Context, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil {
		f.stop()
		f.stop = nil
	}
	if f.stopped {
		return nil, false
	}
	var ctx context.Context
	ctx, f.stop = newContext()
	return ctx, true
}

// stepWork is a step's work: call the agent, and say what to record of its answer.
type stepWork interface {
	// provider is the agent's provider, for the step's metrics.
	provider() string
	call(ctx context.Context) *workflow.StepResult
	// record is the step's record; one of Kind "" records nothing (a step held at its
	// namespace's cap: it goes on later from its transcript). Its Spend is what the step's
	// calls settled that no record booked yet.
	record(res *workflow.StepResult, started, ended time.Time) transcript.Record
	// spend is what books the step's spend, nil for work that makes no model call.
	spend() *quotaMeter
}
