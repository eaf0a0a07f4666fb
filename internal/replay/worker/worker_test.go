package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// gated is a replay that runs until its gate is opened, and says when it started.
type gated struct {
	started chan struct{}
	open    chan struct{}
}

func newGated() *gated { return &gated{started: make(chan struct{}), open: make(chan struct{})} }

func (g *gated) work(ctx context.Context) (string, error) {
	close(g.started)
	select {
	case <-g.open:
		return "found", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// eventually waits for cond, failing the test after a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReplaysRunABoundedNumberAtOnceInAllAndPerNamespace(t *testing.T) {
	p := New[string](Limits{InFlight: 3, PerNamespace: 2})
	replays := map[types.NamespacedName]*gated{}
	order := []types.NamespacedName{key("a", "1"), key("a", "2"), key("a", "3"), key("b", "1"), key("b", "2")}
	for _, k := range order {
		replays[k] = newGated()
		p.Start(k, types.UID(k.String()), replays[k].work)
	}
	states := func() string {
		s := ""
		for _, k := range order {
			state, _, _ := p.State(k, types.UID(k.String()))
			s += fmt.Sprintf("%s=%d ", k, state)
		}
		return s
	}
	// Two of a's run, a's third waits for a slot of its namespace, b's first runs, and b's
	// second waits for a slot at all.
	want := fmt.Sprintf("a/1=%d a/2=%d a/3=%d b/1=%d b/2=%d ", Running, Running, Waiting, Running, Waiting)
	if got := states(); got != want {
		t.Fatalf("states %s, want %s", got, want)
	}
	close(replays[key("a", "1")].open)
	select {
	case e := <-p.Woken():
		if e.Object.GetNamespace() != "a" || e.Object.GetName() != "1" {
			t.Fatalf("woke %s/%s", e.Object.GetNamespace(), e.Object.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run whose replay ended was not woken")
	}
	if state, found, err := p.State(key("a", "1"), "a/1"); state != Done || found != "found" || err != nil {
		t.Fatalf("the ended replay: %d %q %v", state, found, err)
	}
	// Its slot goes to the first in line that may have it: a's third.
	<-replays[key("a", "3")].started
	if got, _, _ := p.State(key("b", "2"), "b/2"); got != Waiting {
		t.Fatalf("b's second is %d with three running", got)
	}
	close(replays[key("b", "1")].open)
	<-replays[key("b", "2")].started
}

func TestAForgottenReplayIsGivenUp(t *testing.T) {
	p := New[string](Limits{InFlight: 1, PerNamespace: 1})
	running, waiting := newGated(), newGated()
	p.Start(key("a", "1"), "u1", running.work)
	p.Start(key("a", "2"), "u2", waiting.work)
	<-running.started
	p.Forget(key("a", "2"))
	p.Forget(key("a", "1"))
	// The running one is cancelled, frees its slot, and wakes nobody: its run is forgotten.
	next := newGated()
	p.Start(key("a", "3"), "u3", next.work)
	<-next.started
	select {
	case <-waiting.started:
		t.Fatal("a replay forgotten while it waited ran")
	default:
	}
	if state, _, _ := p.State(key("a", "1"), "u1"); state != None {
		t.Errorf("a forgotten replay is %d", state)
	}
	select {
	case e := <-p.Woken():
		t.Errorf("woke %s after its replay was forgotten", e.Object.GetName())
	default:
	}
}

func TestAReplayOfAnotherRunOfTheSameNameIsNotThisOnes(t *testing.T) {
	p := New[string](Limits{})
	g := newGated()
	p.Start(key("a", "1"), "old", g.work)
	if state, _, _ := p.State(key("a", "1"), "new"); state != None {
		t.Fatalf("the replay of the run's predecessor is %d for it", state)
	}
	p.Start(key("a", "1"), "new", newGated().work)
	eventually(t, "the predecessor's replay given up", func() bool {
		select {
		case <-g.started:
		default:
			return false
		}
		state, _, _ := p.State(key("a", "1"), "old")
		return state == None
	})
}

func TestAReplayThatPanicsFailsAndTheOperatorGoesOn(t *testing.T) {
	p := New[string](Limits{})
	p.Start(key("a", "1"), "u1", func(context.Context) (string, error) { panic("a bug") })
	<-p.Woken()
	state, _, err := p.State(key("a", "1"), "u1")
	var panicked *PanicError
	if state != Done || !errors.As(err, &panicked) || err.Error() != "the replay panicked: a bug" || len(panicked.Stack) == 0 {
		t.Fatalf("state %d, err %v", state, err)
	}
}
