// Package storedtest records runs in a transcript store as the operator writes them, for the
// tests and benchmarks of replays read from a store: each step through the workflow core, its
// record carrying the handoff record of the step before it.
package storedtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// Recorder writes a run's records as the operator does.
type Recorder struct {
	t     testing.TB
	store transcript.Store
	p     *workflow.Plan
	// Run is the run recorded, its status whole.
	Run *v1alpha1.AgentRun
	// Now is the time of the run's latest record; each step takes a second.
	Now   time.Time
	start time.Time
	// whole is the run's whole handoff sequence: each step's record carries the one before it.
	whole []v1alpha1.HandoffRecord
	// Bytes are the bytes of the records' bodies written.
	Bytes int64
}

// NewRecorder starts run namespace/name of config (pinned as revision, run on plan p) at start,
// with input.
func NewRecorder(t testing.TB, store transcript.Store, p *workflow.Plan, namespace, name, config, revision, input string, start time.Time) *Recorder {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + namespace + "-" + name)},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: config}, Input: input}}
	run.Status = workflow.Start(p, v1alpha1.AgentRunStatus{}, input, revision, start).Status
	return &Recorder{t: t, store: store, p: p, Run: run, Now: start, start: start}
}

// Step takes the run's next step with the agent's answer res, and records it.
func (r *Recorder) Step(res workflow.StepResult) {
	r.t.Helper()
	st := &r.Run.Status
	next := workflow.Next(r.p, st)
	if next.Agent != res.Agent || st.Phase != v1alpha1.PhaseRunning {
		r.t.Fatalf("recording: %s answers step %d, but %s has control (%s)", res.Agent, next.Number, next.Agent, st.Phase)
	}
	started := r.Now
	r.Now = r.Now.Add(time.Second)
	res.Input = next.Input
	body := records.StepBody{Agent: res.Agent, Input: res.Input, Result: res.Result, Started: started, LatencyMs: time.Second.Milliseconds()}
	if n := len(r.whole); n > 0 {
		body.Previous = &r.whole[n-1]
	}
	rec := body.Record(records.RunID{UID: string(r.Run.UID), Namespace: r.Run.Namespace, Name: r.Run.Name}, next.Number, r.Now)
	if _, err := r.store.Append(context.Background(), rec); err != nil {
		r.t.Fatal(err)
	}
	r.Bytes += int64(len(rec.Body))
	*st = workflow.Apply(r.p, *st, res, r.Now).Status
	r.keep()
}

// Join joins the branches of the run's fan-out, ended as runs says.
func (r *Recorder) Join(runs map[string]workflow.BranchRun) {
	d, _ := workflow.Join(r.p, r.Run.Status, runs, r.Now)
	r.Run.Status = d.Status
	r.keep()
}

// keep adds the status's new handoff records to the whole sequence.
func (r *Recorder) keep() {
	for _, h := range r.Run.Status.HandoffSequence {
		if n := len(r.whole); n == 0 || workflow.RecordAfter(h, r.whole[n-1]) {
			r.whole = append(r.whole, h)
		}
	}
}

// Ended is the recorded run as the cluster holds it once it ended: status keeps the latest
// handoffs.
func (r *Recorder) Ended() *v1alpha1.AgentRun {
	r.t.Helper()
	if !r.Run.Status.Phase.Terminal() {
		r.t.Fatalf("recording: the run is %s at its end", r.Run.Status.Phase)
	}
	run := r.Run.DeepCopy()
	start := metav1.NewMicroTime(r.start)
	run.Status.StartTime = &start
	workflow.StoreStatus(&run.Status)
	return run
}

// Ticket is the answers of a helpdesk's ticket of steps steps (at least 2), each output of
// size bytes: triage and billing hand it back and forth, then the resolver ends it.
func Ticket(steps, size int) []workflow.StepResult {
	var out []workflow.StepResult
	say := func(agent string, i int, to string) {
		text := fmt.Sprintf("%s's answer %d: ", agent, i)
		text += strings.Repeat("x", max(size-len(text), 0))
		out = append(out, workflow.StepResult{Agent: agent, Result: workflow.Result{Output: text, Handoff: to, Tokens: 100}})
	}
	for i := range (steps - 2) / 2 {
		say("triage", i, "billing")
		say("billing", i, "triage")
	}
	say("triage", steps, "resolver")
	say("resolver", steps, "")
	return out
}
