// Package steps runs agent steps outside the reconcile workers, so a slow model call never
// leaves other runs waiting: a step's goroutine builds its request, asks the agent's provider,
// and makes the answer durable in the transcript before it wakes the run to apply it.
//
// How a step moves through the operator, and what it keeps in memory on the way:
//
//  1. Start. The reconciler finds no flight for the run's next step (Next). Until this process
//     has found a step of the run not yet recorded, Next asks the transcript whether that step
//     already ended (it may have, in an operator that stopped before writing the status); if
//     so the step is applied from its record and the agent is not called. Otherwise Start
//     runs it in a goroutine of its own once it has a slot.
//  2. Wake. When the agent answers, the goroutine writes the step's record to the transcript
//     (durable before it is applied), keeps the result in the run's flight, and wakes the run.
//  3. Apply. The next reconcile finds the flight ended (Next) and lets the workflow core decide
//     the next status from it; once that is written, or held to be written with the steps
//     after it, the flight is consumed.
package steps

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
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/endpoints"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/ledger"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/pacing"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/toolbox"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// Config is what a Runner needs.
type Config struct {
	Store     transcript.Store
	Providers *agents.Providers
	// Toolboxes make the toolboxes of steps of agents with tools.
	Toolboxes *toolbox.Maker
	// Guardrails asks configs' guardrails about steps' inputs and outputs.
	Guardrails *guardrails.Client
	Clock      clock.Clock
	// TraceContent puts prompts, answers, tool arguments and results on the steps' spans.
	TraceContent bool
	Log          logr.Logger
	// MaxInFlight bounds the steps running at once across all runs.
	MaxInFlight int
	// Endpoints resolves agents' model.endpointRef, and Pacer paces the calls of every step on
	// one endpoint together; both nil, endpoint references cannot be used.
	Endpoints *endpoints.Resolver
	Pacer     *pacing.Pacer
	// Ledger holds what each namespace's calls spent and reserved, and Quotas reads the caps
	// of a namespace's AgentQuotas: every model call is held to them. Both nil, calls are held
	// to no cap and their spend is not booked.
	Ledger *ledger.Ledger
	Quotas func(ctx context.Context, namespace string) (*quota.Caps, error)
}

// Runner runs the steps of every run the operator works on.
type Runner struct {
	Config
	// wake enqueues a run whose step has ended.
	wake chan event.GenericEvent
	// slots hands out the places of steps running at once; a step that finds none waits in
	// line without a goroutine of its own, so ten thousand runs waiting cost no stacks.
	slots *slots

	mu   sync.Mutex
	runs map[types.NamespacedName]*runSteps
	// held are the calls runs' steps were last held at a cap with (quota.go).
	held map[types.NamespacedName]heldCall
}

// runSteps is what the runner keeps of one run.
type runSteps struct {
	uid types.UID
	// flight is the step running, or ended and waiting to be applied.
	flight *flight
	// checked is set once the transcript was asked about a step this process did not start.
	checked bool
}

// New makes a Runner.
func New(cfg Config) *Runner {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	s := &Runner{Config: cfg, wake: make(chan event.GenericEvent, 1024), runs: map[types.NamespacedName]*runSteps{}}
	s.slots = &slots{free: max(cfg.MaxInFlight, 1), launch: s.launch}
	return s
}

// Woken is where the runner sends the runs whose step ended.
func (s *Runner) Woken() <-chan event.GenericEvent { return s.wake }

// State says where a run's next step is.
type State int

const (
	// NotStarted means the step is to be started.
	NotStarted State = iota
	// Running means the step runs, or waits for a slot.
	Running
	// Waiting means the step waits for its model endpoint's capacity (see WaitingFor).
	Waiting
	// Ended means the step ended and is to be applied.
	Ended
)

// with runs f on the run's state, made for this run's UID if there is none or it was another
// run's of the same name.
func (s *Runner) with(run *v1alpha1.AgentRun, f func(*runSteps)) {
	key := client.ObjectKeyFromObject(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[key]
	if !ok || r.uid != run.UID {
		if ok && r.flight != nil {
			r.flight.cancel()
		}
		r = &runSteps{uid: run.UID}
		s.runs[key] = r
	}
	f(r)
}

// existing runs f on the run's state only if it is still kept for this run: a step's goroutine
// that outlived its run must not bring the run's state back.
func (s *Runner) existing(key types.NamespacedName, uid types.UID, f func(*runSteps)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[key]; ok && r.uid == uid {
		f(r)
	}
}

// Forget drops what the runner keeps of a run, giving up its step in flight.
func (s *Runner) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[key]; ok {
		if r.flight != nil {
			r.flight.cancel()
		}
		delete(s.runs, key)
	}
	delete(s.held, key)
}

// Next reports where the run's next step is: not started, running, or ended with its result. A
// flight for any other step of the run is stale (the status moved on) and is dropped. Until
// this process has started a step of the run, a step not started may have ended in an
// operator that stopped before it wrote the status: the transcript is asked, and a recorded
// step is taken as ended, without calling the agent again.
func (s *Runner) Next(ctx context.Context, run *v1alpha1.AgentRun, step workflow.Step) (State, workflow.StepResult, error) {
	state, res, look := NotStarted, workflow.StepResult{}, false
	s.with(run, func(r *runSteps) {
		f := r.flight
		switch {
		case f == nil:
			look = !r.checked
		case f.step.Number != step.Number || f.step.Agent != step.Agent:
			f.cancel()
			r.flight = nil
			look = !r.checked
		case f.done:
			state, res = Ended, *f.result
		default:
			state = Running
			if _, _, waiting := f.waitingFor(); waiting {
				state = Waiting
			}
		}
	})
	if !look {
		return state, res, nil
	}
	return s.recorded(ctx, run, step)
}

// WaitingFor says which model endpoint the run's step waits for, and since when.
func (s *Runner) WaitingFor(run *v1alpha1.AgentRun) (pacing.Key, time.Time, bool) {
	var f *flight
	s.existing(client.ObjectKeyFromObject(run), run.UID, func(r *runSteps) { f = r.flight })
	if f == nil {
		return pacing.Key{}, time.Time{}, false
	}
	return f.waitingFor()
}

// start runs the step in its own goroutine once it has a slot, with the step's deadline: it
// calls the agent, records the answer in the transcript, and wakes the run.
func (s *Runner) start(run *v1alpha1.AgentRun, step workflow.Step, work stepWork) {
	f := &flight{step: step, work: work, key: client.ObjectKeyFromObject(run), uid: run.UID}
	s.with(run, func(r *runSteps) {
		if r.flight != nil {
			r.flight.cancel()
		}
		r.flight = f
	})
	metrics.StepsInFlight.Inc()
	if p, ok := work.(pacedWork); ok {
		if on := p.pace(); on.endpoint != nil {
			s.queue(f, on, false)
			return
		}
	}
	s.slots.take(f)
}

// queue puts a step in its endpoint's line (at the front of its namespace's, again, for a step
// the server turned away): it holds no goroutine and no slot until the endpoint has capacity
// for its first call, and then takes a slot.
func (s *Runner) queue(f *flight, on paced, again bool) {
	key := on.key
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		f.leave()
		return
	}
	f.waiting, f.since = &key, s.Clock.Now()
	f.mu.Unlock()
	ready := func(g *pacing.Grant) {
		f.mu.Lock()
		stopped := f.stopped
		f.waiting, f.cancelWait = nil, nil
		f.mu.Unlock()
		on.meter.admitted(g)
		if stopped {
			f.leave()
			return
		}
		s.slots.take(f)
	}
	enqueue := on.endpoint.Enqueue
	if again {
		enqueue = on.endpoint.Requeue
	}
	cancel := enqueue(on.ask, ready)
	f.mu.Lock()
	if f.waiting != nil {
		f.cancelWait = cancel
	}
	stopped := f.stopped
	f.mu.Unlock()
	if stopped && cancel() {
		f.leave()
	}
}

// launch starts a step that has its slot, in a goroutine of its own.
func (s *Runner) launch(f *flight) {
	ctx, ok := f.begin()
	if !ok {
		// Given up between the line and its slot.
		f.leave()
		s.slots.release()
		return
	}
	go s.run(ctx, f)
}

// run is a step's goroutine. While the agent works, this goroutine waits in the provider's
// call: what it holds on its stack is held as long, so the frames below the provider's are
// small and hold pointers.
func (s *Runner) run(ctx context.Context, f *flight) {
	began := time.Now()
	callStep(ctx, &f.step, f.work, func(res *workflow.StepResult) {
		if p, ok := f.work.(pacedWork); ok {
			if on := p.pace(); on.endpoint != nil && on.meter.rateLimited() {
				// The server turned the step's first call away: nothing was done, so the step
				// goes back to the front of its line, without its slot, its goroutine or an
				// error, and waits for the capacity the endpoint now paces by.
				p.again()
				s.slots.release()
				metrics.StepsRateLimited.Inc()
				s.queue(f, on, true)
				return
			}
		}
		defer f.leave()
		metrics.StepDuration.WithLabelValues(f.work.provider()).Observe(time.Since(began).Seconds())
		s.slots.release()
		s.finish(f, res, f.work.record(res, began, time.Now()))
	})
}

// finish makes a step's record durable, keeps its result in the run's flight and wakes the run.
// A step held at its namespace's cap records nothing: its result is handed on as it is. What the
// step's calls used is booked with the record, or on its own if the step was given up.
func (s *Runner) finish(f *flight, answer *workflow.StepResult, rec transcript.Record) {
	ctx, ok := f.recording()
	if !ok {
		s.bookAlone(f, rec.Spend)
		return
	}
	res := *answer
	if rec.Kind != "" {
		if res, ok = s.persist(ctx, f.key, f.step.Agent, rec); !ok {
			s.bookAlone(f, rec.Spend)
			return
		}
	}
	current := false
	s.existing(f.key, f.uid, func(r *runSteps) {
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

// bookAlone books what a step's calls used when no record of it was stored: the step was given
// up (its run ended or was deleted) after its calls were made.
func (s *Runner) bookAlone(f *flight, spend []transcript.Spend) {
	q := f.work.spend()
	if q == nil {
		return
	}
	q.Done(spend, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.bookAlone(ctx); err != nil {
		s.Log.Error(err, "Booking the spend of a step given up", "agentRun", klog.KRef(f.key.Namespace, f.key.Name), "step", f.step.Number)
	}
}

// persistBackoff paces the retries of a transcript write that failed.
var persistBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 1 << 30}

// persist writes a step's record and returns the result the transcript holds for the step: its
// own, or the one another writer stored first. A write that fails is tried again until it
// succeeds or the step is dropped (the run ended or was deleted): a step is never applied
// before it is durable.
func (s *Runner) persist(ctx context.Context, key types.NamespacedName, agent string, rec transcript.Record) (workflow.StepResult, bool) {
	backoff := persistBackoff
	for {
		began := time.Now()
		stored, err := s.Store.Append(ctx, rec)
		metrics.TranscriptWrite.Observe(time.Since(began).Seconds())
		if err == nil {
			s.booked(key, rec.Spend, stored[0].Spend)
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
			s.Log.Error(err, "The transcript refused a step's record; the step fails", "agentRun", klog.KRef(key.Namespace, key.Name), "step", rec.Step)
			rec.Body = transcript.Body(records.StepBody{Agent: agent, Error: "the transcript refused the step's record: " + err.Error()})
			continue
		}
		s.Log.Error(err, "Writing a step to the transcript; retrying", "agentRun", klog.KRef(key.Namespace, key.Name), "step", rec.Step)
		select {
		case <-ctx.Done():
			return workflow.StepResult{}, false
		case <-time.After(backoff.Step()):
		}
	}
}

// booked tells the ledger what a stored record booked; spend a record of the same key stored
// before took the place of (an operator that stopped) is booked on its own.
func (s *Runner) booked(key types.NamespacedName, sent, booked []transcript.Spend) {
	if len(sent) == 0 || s.Ledger == nil {
		return
	}
	if len(booked) > 0 {
		s.Ledger.Booked(key.Namespace, booked)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Ledger.Book(ctx, key.Namespace, sent); err != nil {
		s.Log.Error(err, "Booking the spend of a step recorded before", "agentRun", klog.KRef(key.Namespace, key.Name))
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

// Consumed drops the run's step once its result is applied, if it is still that step.
func (s *Runner) Consumed(run *v1alpha1.AgentRun, number int32) {
	s.with(run, func(r *runSteps) {
		if f := r.flight; f != nil && f.step.Number == number && f.done {
			r.flight = nil
		}
	})
}
