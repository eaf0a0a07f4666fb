// Package worker runs replays (spec.replay) outside the reconcile workers, as package steps
// runs agent steps: a replay reads a recorded run's transcript and takes it through the
// workflow core, which may take a while, and no other run may wait for it. A bounded number
// run at once, in all and per namespace, so that one namespace's replays neither take the
// operator's memory nor keep other namespaces' replays waiting; the others wait in line, first
// come first served, without a goroutine of their own. When a replay ends, its run is woken
// to write what it found.
package worker

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// State says where a run's replay is.
type State int

const (
	// None means no replay of the run is kept: none began in this process, or it was
	// forgotten.
	None State = iota
	// Waiting means the replay waits for a slot.
	Waiting
	// Running means the replay runs.
	Running
	// Done means the replay ended, and its result is kept until the run is forgotten.
	Done
)

// Limits bound the replays running at once.
type Limits struct {
	// InFlight bounds them in all, PerNamespace in each namespace (each at least 1).
	InFlight, PerNamespace int
}

// Work is a replay: it returns what it found, or why it could not. It should give up soon once
// ctx is done.
type Work[T any] func(ctx context.Context) (T, error)

// Pool runs the replays of runs, each at most once at a time per run.
type Pool[T any] struct {
	limits Limits
	wake   chan event.GenericEvent

	mu      sync.Mutex
	jobs    map[types.NamespacedName]*job[T]
	running int
	inNS    map[string]int
	// line holds the replays waiting for a slot, in the order they began; ones forgotten
	// meanwhile are dropped as the line moves.
	line []*job[T]
}

// job is one run's replay.
type job[T any] struct {
	key    types.NamespacedName
	uid    types.UID
	work   Work[T]
	ctx    context.Context
	cancel context.CancelFunc
	state  State
	result T
	err    error
}

// New makes a Pool.
func New[T any](l Limits) *Pool[T] {
	l.InFlight, l.PerNamespace = max(l.InFlight, 1), max(l.PerNamespace, 1)
	return &Pool[T]{limits: l, wake: make(chan event.GenericEvent, 1024), jobs: map[types.NamespacedName]*job[T]{}, inNS: map[string]int{}}
}

// Woken is where the pool sends the runs whose replay ended.
func (p *Pool[T]) Woken() <-chan event.GenericEvent { return p.wake }

// Start begins the replay work of the run key with uid: now if there is a slot, else when one
// frees. A replay the pool keeps of another run of that name is given up.
func (p *Pool[T]) Start(key types.NamespacedName, uid types.UID, work Work[T]) {
	ctx, cancel := context.WithCancel(context.Background())
	j := &job[T]{key: key, uid: uid, work: work, ctx: ctx, cancel: cancel, state: Waiting}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.jobs[key]; ok {
		old.cancel()
	}
	p.jobs[key] = j
	p.line = append(p.line, j)
	p.launch()
}

// State says where the replay of run key with uid is, and, once it is Done, what it found.
func (p *Pool[T]) State(key types.NamespacedName, uid types.UID) (State, T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[key]
	if !ok || j.uid != uid {
		var zero T
		return None, zero, nil
	}
	return j.state, j.result, j.err
}

// Forget drops the run's replay, giving it up if it waits or runs.
func (p *Pool[T]) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if j, ok := p.jobs[key]; ok {
		j.cancel()
		delete(p.jobs, key)
	}
}

// launch starts the replays at the head of the line that have a slot, in all and in their
// namespace; one whose namespace has none lets those behind it of other namespaces go first.
// p.mu is held.
func (p *Pool[T]) launch() {
	kept := p.line[:0]
	for _, j := range p.line {
		switch {
		case p.jobs[j.key] != j:
			// Forgotten while it waited.
		case p.running < p.limits.InFlight && p.inNS[j.key.Namespace] < p.limits.PerNamespace:
			p.running++
			p.inNS[j.key.Namespace]++
			j.state = Running
			go p.run(j)
		default:
			kept = append(kept, j)
		}
	}
	clear(p.line[len(kept):])
	p.line = kept
}

// run runs a replay, keeps what it found, frees its slot for the next, and wakes its run. A
// replay that panics has failed; the operator goes on.
func (p *Pool[T]) run(j *job[T]) {
	result, err := p.safely(j)
	j.cancel()
	p.mu.Lock()
	j.result, j.err, j.state = result, err, Done
	p.running--
	if p.inNS[j.key.Namespace]--; p.inNS[j.key.Namespace] == 0 {
		delete(p.inNS, j.key.Namespace)
	}
	current := p.jobs[j.key] == j
	p.launch()
	p.mu.Unlock()
	if current {
		p.wake <- event.GenericEvent{Object: &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: j.key.Namespace, Name: j.key.Name}}}
	}
}

// safely runs j's work, making a panic its error.
func (p *Pool[T]) safely(j *job[T]) (result T, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return j.work(j.ctx)
}

// PanicError is a replay that panicked, with where.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("the replay panicked: %v", e.Value) }
