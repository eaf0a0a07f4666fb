package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// stepRunner runs agent steps outside the reconcile workers, so a slow model call never
// leaves other runs waiting, and makes each step's result durable in the transcript before it
// wakes the run to apply it (see runs.go for the whole path of a step).
type stepRunner struct {
	runs  *runTable
	store transcript.Store
	log   logr.Logger
	// wake enqueues a run whose step has ended.
	wake chan event.GenericEvent
	// slots hands out the places of steps running at once; a step that finds none waits in
	// line without a goroutine of its own, so ten thousand runs waiting cost no stacks.
	slots *slots
}

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
				metrics.StepsInFlight.Dec()
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
		metrics.StepsInFlight.Dec() // a step given up while it waited
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
}

// cancel gives the step up: one waiting for a slot never starts, a running one's context ends.
func (f *flight) cancel() {
	f.mu.Lock()
	f.stopped = true
	stop := f.stop
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
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
	record(res *workflow.StepResult, started, ended time.Time) transcript.Record
}

func newStepRunner(runs *runTable, store transcript.Store, log logr.Logger, maxInFlight int) *stepRunner {
	s := &stepRunner{
		runs:  runs,
		store: store,
		log:   log,
		wake:  make(chan event.GenericEvent, 1024),
	}
	s.slots = &slots{free: max(maxInFlight, 1), launch: s.launch}
	return s
}

// flightState says where the run's next step is.
type flightState int

const (
	notStarted flightState = iota
	running
	ended
)

// lookup reports the state of the run's step. A flight for any other step of the run is
// stale (the status moved on) and is dropped.
func (s *stepRunner) lookup(run *v1alpha1.AgentRun, step workflow.Step) (state flightState, res workflow.StepResult) {
	s.runs.with(run, func(r *runState) {
		f := r.flight
		switch {
		case f == nil:
			state = notStarted
		case f.step.Number != step.Number || f.step.Agent != step.Agent:
			f.cancel()
			r.flight = nil
			state = notStarted
		case f.done:
			state, res = ended, *f.result
		default:
			state = running
		}
	})
	return state, res
}

// adopt takes a step that ended before this process started, read from the transcript, as the
// run's ended flight.
func (s *stepRunner) adopt(run *v1alpha1.AgentRun, step workflow.Step, res workflow.StepResult) {
	s.runs.with(run, func(r *runState) {
		r.flight = &flight{step: step, done: true, result: &res}
	})
}

// start runs the step in its own goroutine once it has a slot, with the step's deadline: it
// calls the agent, records the answer in the transcript, and wakes the run.
func (s *stepRunner) start(run *v1alpha1.AgentRun, step workflow.Step, work stepWork) {
	f := &flight{step: step, work: work, key: client.ObjectKeyFromObject(run), uid: run.UID}
	s.runs.with(run, func(r *runState) {
		if r.flight != nil {
			r.flight.cancel()
		}
		r.flight = f
	})
	metrics.StepsInFlight.Inc()
	s.slots.take(f)
}

// launch starts a step that has its slot, in a goroutine of its own.
func (s *stepRunner) launch(f *flight) {
	ctx, ok := f.begin()
	if !ok {
		// Given up between the line and its slot.
		metrics.StepsInFlight.Dec()
		s.slots.release()
		return
	}
	go s.run(ctx, f)
}

// run is a step's goroutine. While the agent works, this goroutine waits in the provider's
// call: what it holds on its stack is held as long, so the frames below the provider's are
// small and hold pointers.
func (s *stepRunner) run(ctx context.Context, f *flight) {
	began := time.Now()
	callStep(ctx, &f.step, f.work, func(res *workflow.StepResult) {
		defer metrics.StepsInFlight.Dec()
		metrics.StepDuration.WithLabelValues(f.work.provider()).Observe(time.Since(began).Seconds())
		s.slots.release()
		s.finish(f, f.work.record(res, began, time.Now()))
	})
}

// finish makes a step's record durable, keeps its result in the run's flight and wakes the run.
func (s *stepRunner) finish(f *flight, rec transcript.Record) {
	ctx, ok := f.recording()
	if !ok {
		return
	}
	res, ok := s.persist(ctx, f.key, f.step.Agent, rec)
	if !ok {
		return
	}
	current := false
	s.runs.existing(f.key, f.uid, func(r *runState) {
		if current = r.flight == f; current {
			f.done, f.result = true, &res
		}
	})
	if !current {
		return
	}
	obj := &v1alpha1.AgentRun{}
	obj.Name, obj.Namespace = f.key.Name, f.key.Namespace
	select {
	case s.wake <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

// persistBackoff paces the retries of a transcript write that failed.
var persistBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 1 << 30}

// persist writes a step's record and returns the result the transcript holds for the step: its
// own, or the one another writer stored first. A write that fails is tried again until it
// succeeds or the step is dropped (the run ended or was deleted): a step is never applied
// before it is durable.
func (s *stepRunner) persist(ctx context.Context, key types.NamespacedName, agent string, rec transcript.Record) (workflow.StepResult, bool) {
	backoff := persistBackoff
	for {
		began := time.Now()
		stored, err := s.store.Append(ctx, rec)
		metrics.TranscriptWrite.Observe(time.Since(began).Seconds())
		if err == nil {
			res, err := records.ResultOf(stored[0])
			if err != nil {
				res = workflow.StepResult{Agent: agent, Error: err.Error()}
			}
			return res, true
		}
		if ctx.Err() != nil {
			return workflow.StepResult{}, false
		}
		metrics.TranscriptWriteErrors.Inc()
		if errors.Is(err, transcript.ErrBadRecord) && rec.Kind == transcript.KindStep {
			// The store will never take it: the step fails, with the store's reason, at once.
			s.log.Error(err, "The transcript refused a step's record; the step fails", "agentRun", klog.KRef(key.Namespace, key.Name), "step", rec.Step)
			rec.Body = transcript.Body(records.StepBody{Agent: agent, Error: "the transcript refused the step's record: " + err.Error()})
			continue
		}
		s.log.Error(err, "Writing a step to the transcript; retrying", "agentRun", klog.KRef(key.Namespace, key.Name), "step", rec.Step)
		select {
		case <-ctx.Done():
			return workflow.StepResult{}, false
		case <-time.After(backoff.Step()):
		}
	}
}

// lateAnswer is how long past a step's end (its deadline, or its run's) a provider's answer is
// still taken.
const lateAnswer = time.Second

// caller is what callStep calls: a step's work.
type caller interface {
	call(ctx context.Context) *workflow.StepResult
}

// callStep calls work in this goroutine and hands its result to done, once. A provider that
// ignores its context loses its answer, not the slot: lateAnswer after ctx ends, done is given
// a timeout result from a timer, and work's answer, should it ever come, is dropped. So a
// running step costs one goroutine, not two.
func callStep(ctx context.Context, step *workflow.Step, work caller, done func(*workflow.StepResult)) {
	var once sync.Once
	finish := func(res *workflow.StepResult) { once.Do(func() { done(res) }) }
	unwatch := context.AfterFunc(ctx, func() {
		time.AfterFunc(lateAnswer, func() {
			finish(&workflow.StepResult{Agent: step.Agent, Input: step.Input, TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded),
				Error: fmt.Sprintf("timed out after %s", step.Timeout)})
		})
	})
	res := work.call(ctx)
	unwatch()
	finish(res)
}

// consumed drops the run's step once its result is written, if it is still that step.
func (s *stepRunner) consumed(run *v1alpha1.AgentRun, number int32) {
	s.runs.with(run, func(r *runState) {
		if f := r.flight; f != nil && f.step.Number == number && f.done {
			r.flight = nil
		}
	})
}
