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
	"github.com/baton-dev/baton/controllers/workflow"
	"github.com/baton-dev/baton/transcript"
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
// first served, and is started when a slot frees.
type slots struct {
	mu    sync.Mutex
	free  int
	queue []waiting
}

// waiting is a step in line for a slot.
type waiting struct {
	ctx    context.Context
	launch func()
}

// take starts launch now if a slot is free, else when one frees, unless ctx ends first.
func (s *slots) take(ctx context.Context, launch func()) {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		launch()
		return
	}
	if len(s.queue) >= 1024 && len(s.queue)%1024 == 0 {
		// Steps given up while they waited (their runs ended) leave the line.
		kept := s.queue[:0]
		for _, w := range s.queue {
			if w.ctx.Err() == nil {
				kept = append(kept, w)
			} else {
				stepsInFlight.Dec()
			}
		}
		clear(s.queue[len(kept):])
		s.queue = kept
	}
	s.queue = append(s.queue, waiting{ctx: ctx, launch: launch})
	s.mu.Unlock()
}

// release gives the slot to the first step in line that still wants it, or frees it.
func (s *slots) release() {
	s.mu.Lock()
	for len(s.queue) > 0 {
		w := s.queue[0]
		s.queue[0] = waiting{}
		s.queue = s.queue[1:]
		if w.ctx.Err() == nil {
			s.mu.Unlock()
			w.launch()
			return
		}
		stepsInFlight.Dec() // a step given up while it waited
	}
	s.free++
	s.mu.Unlock()
}

// flight is one step in flight, or ended and waiting to be applied.
type flight struct {
	number int32
	agent  string
	cancel context.CancelFunc
	done   bool
	result workflow.StepResult
}

// stepWork is a step's work: call the agent, and say what to record of its answer.
type stepWork struct {
	// provider is the agent's provider, for the step's metrics.
	provider string
	call     func(ctx context.Context) workflow.StepResult
	record   func(res workflow.StepResult, started, ended time.Time) transcript.Record
}

func newStepRunner(runs *runTable, store transcript.Store, log logr.Logger, maxInFlight int) *stepRunner {
	return &stepRunner{
		runs:  runs,
		store: store,
		log:   log,
		wake:  make(chan event.GenericEvent, 1024),
		slots: &slots{free: max(maxInFlight, 1)},
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
// stale (the status moved on) and is dropped.
func (s *stepRunner) lookup(run *v1alpha1.AgentRun, step workflow.Step) (state flightState, res workflow.StepResult) {
	s.runs.with(run, func(r *runState) {
		f := r.flight
		switch {
		case f == nil:
			state = notStarted
		case f.number != step.Number || f.agent != step.Agent:
			f.cancel()
			r.flight = nil
			state = notStarted
		case f.done:
			state, res = ended, f.result
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
		r.flight = &flight{number: step.Number, agent: step.Agent, cancel: func() {}, done: true, result: res}
	})
}

// start runs the step in its own goroutine, with the step's deadline: it calls the agent,
// records the answer in the transcript, and wakes the run.
func (s *stepRunner) start(run *v1alpha1.AgentRun, step workflow.Step, work stepWork) {
	key, uid := client.ObjectKeyFromObject(run), run.UID
	ctx, cancel := context.WithCancel(context.Background())
	f := &flight{number: step.Number, agent: step.Agent, cancel: cancel}
	s.runs.with(run, func(r *runState) {
		if r.flight != nil {
			r.flight.cancel()
		}
		r.flight = f
	})
	stepsInFlight.Inc()
	s.slots.take(ctx, func() { go s.run(ctx, key, uid, f, step, work) })
}

// run is a step's goroutine, started once the step has a slot.
func (s *stepRunner) run(ctx context.Context, key types.NamespacedName, uid types.UID, f *flight, step workflow.Step, work stepWork) {
	stepCtx, stop := context.WithTimeout(ctx, step.Timeout)
	began := time.Now()
	callStep(stepCtx, step, work.call, func(res workflow.StepResult) {
		defer stepsInFlight.Dec()
		stepDuration.WithLabelValues(work.provider).Observe(time.Since(began).Seconds())
		stop()
		s.slots.release()
		s.finish(ctx, key, uid, f, step, work.record(res, began, time.Now()))
	})
}

// finish makes a step's record durable, keeps its result in the run's flight and wakes the run.
func (s *stepRunner) finish(ctx context.Context, key types.NamespacedName, uid types.UID, f *flight, step workflow.Step, rec transcript.Record) {
	res, ok := s.persist(ctx, key, step.Agent, rec)
	if !ok {
		return
	}
	current := false
	s.runs.existing(key, uid, func(r *runState) {
		if current = r.flight == f; current {
			f.done, f.result = true, res
		}
	})
	if !current {
		return
	}
	obj := &v1alpha1.AgentRun{}
	obj.Name, obj.Namespace = key.Name, key.Namespace
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
		transcriptWrite.Observe(time.Since(began).Seconds())
		if err == nil {
			res, err := resultOf(stored[0])
			if err != nil {
				res = workflow.StepResult{Agent: agent, Error: err.Error()}
			}
			return res, true
		}
		if ctx.Err() != nil {
			return workflow.StepResult{}, false
		}
		transcriptWriteErrors.Inc()
		if errors.Is(err, transcript.ErrBadRecord) && rec.Kind == transcript.KindStep {
			// The store will never take it: the step fails, with the store's reason, at once.
			s.log.Error(err, "The transcript refused a step's record; the step fails", "agentRun", klog.KRef(key.Namespace, key.Name), "step", rec.Step)
			rec.Body = transcript.Body(stepBody{Agent: agent, Error: "the transcript refused the step's record: " + err.Error()})
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

// callStep calls do in this goroutine and hands its result to done, once. A provider that
// ignores its context loses its answer, not the slot: lateAnswer after ctx ends, done is given
// a timeout result from a timer, and do's answer, should it ever come, is dropped. So a
// running step costs one goroutine, not two.
func callStep(ctx context.Context, step workflow.Step, do func(context.Context) workflow.StepResult, done func(workflow.StepResult)) {
	var once sync.Once
	finish := func(res workflow.StepResult) { once.Do(func() { done(res) }) }
	unwatch := context.AfterFunc(ctx, func() {
		time.AfterFunc(lateAnswer, func() {
			finish(workflow.StepResult{Agent: step.Agent, Input: step.Input, TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded),
				Error: fmt.Sprintf("timed out after %s", step.Timeout)})
		})
	})
	res := do(ctx)
	unwatch()
	finish(res)
}

// consumed drops the run's step once its result is written, if it is still that step.
func (s *stepRunner) consumed(run *v1alpha1.AgentRun, number int32) {
	s.runs.with(run, func(r *runState) {
		if f := r.flight; f != nil && f.number == number && f.done {
			r.flight = nil
		}
	})
}
