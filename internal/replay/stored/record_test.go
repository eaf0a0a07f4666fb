package stored_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/internal/workflow"
	. "github.com/baton-dev/baton/test/builders"
)

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// open opens a SQLite transcript store of the test's own.
func open(t testing.TB) transcript.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// helpdesk is a Swarm whose triage and billing agents hand a ticket back and forth, steps
// times in all, and whose resolver ends it: the limits and the loop detectors let it.
func helpdesk(steps int) *ConfigWrapper {
	n := int32(steps + 10)
	return MakeConfig("helpdesk", "ns").Agents(
		MakeAgent("triage").HandsOffTo("billing", "resolver"),
		MakeAgent("billing").HandsOffTo("triage"),
		MakeAgent("resolver").Terminator(),
	).MaxHandoffs(n).MaxSteps(n).MaxTokens(int64(n)*1000).Allow(n, "triage", "billing").Timeout(time.Duration(n) * time.Minute)
}

func planOf(t testing.TB, c *ConfigWrapper) *workflow.Plan {
	t.Helper()
	p, errs := workflow.NewPlan(c.Obj().Spec, nil)
	if len(errs) > 0 {
		t.Fatalf("NewPlan: %v", errs)
	}
	return p.ForRun("ticket", "ns", "", "alice")
}

// ticket is the answers of the helpdesk's ticket of steps steps, each output of size bytes.
func ticket(steps, size int) []workflow.StepResult {
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

// recorder writes a run's records as the operator does, a step at a time through the core.
type recorder struct {
	t     testing.TB
	store transcript.Store
	p     *workflow.Plan
	run   *v1alpha1.AgentRun
	now   time.Time
	// whole is the run's whole handoff sequence: each step's record carries the one before it.
	whole []v1alpha1.HandoffRecord
	// bytes are the bytes of the records written.
	bytes int64
}

// newRecorder starts run name of plan p, with uid, on input.
func newRecorder(t testing.TB, store transcript.Store, p *workflow.Plan, name, input string) *recorder {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "helpdesk"}, Input: input}}
	run.Status = workflow.Start(p, v1alpha1.AgentRunStatus{}, input, "helpdesk-1", t0).Status
	return &recorder{t: t, store: store, p: p, run: run, now: t0}
}

// step takes the run's next step with the agent's answer res, and records it.
func (r *recorder) step(res workflow.StepResult) {
	r.t.Helper()
	st := &r.run.Status
	next := workflow.Next(r.p, st)
	if next.Agent != res.Agent || st.Phase != v1alpha1.PhaseRunning {
		r.t.Fatalf("recording: %s answers step %d, but %s has control (%s)", res.Agent, next.Number, next.Agent, st.Phase)
	}
	started := r.now
	r.now = r.now.Add(time.Second)
	res.Input = next.Input
	body := records.StepBody{Agent: res.Agent, Input: res.Input, Result: res.Result, Started: started, LatencyMs: time.Second.Milliseconds()}
	if n := len(r.whole); n > 0 {
		body.Previous = &r.whole[n-1]
	}
	rec := body.Record(records.RunID{UID: string(r.run.UID), Namespace: r.run.Namespace, Name: r.run.Name}, next.Number, r.now)
	if _, err := r.store.Append(context.Background(), rec); err != nil {
		r.t.Fatal(err)
	}
	r.bytes += int64(len(rec.Body))
	*st = workflow.Apply(r.p, *st, res, r.now).Status
	r.keep()
}

// keep adds the status's new handoff records to the whole sequence.
func (r *recorder) keep() {
	for _, h := range r.run.Status.HandoffSequence {
		if n := len(r.whole); n == 0 || workflow.RecordAfter(h, r.whole[n-1]) {
			r.whole = append(r.whole, h)
		}
	}
}

// ended is the recorded run as the cluster holds it once it ended: status keeps the latest
// handoffs.
func (r *recorder) ended() *v1alpha1.AgentRun {
	r.t.Helper()
	if !r.run.Status.Phase.Terminal() {
		r.t.Fatalf("recording: the run is %s at its end", r.run.Status.Phase)
	}
	run := r.run.DeepCopy()
	start := metav1.NewMicroTime(t0)
	run.Status.StartTime = &start
	workflow.StoreHistory(&run.Status)
	return run
}

// recordTicket records the helpdesk's ticket of steps steps with outputs of size bytes.
func recordTicket(t testing.TB, store transcript.Store, p *workflow.Plan, steps, size int) (*v1alpha1.AgentRun, int64) {
	t.Helper()
	r := newRecorder(t, store, p, "ticket", "my invoice is wrong")
	for _, res := range ticket(steps, size) {
		r.step(res)
	}
	return r.ended(), r.bytes
}

// research is a Swarm whose lead fans out to a web and a papers researcher, and whose writer
// joins them and ends the run.
func research() *ConfigWrapper {
	return MakeConfig("research", "ns").Agents(
		MakeAgent("lead").HandsOffTo("web", "papers", "writer").Parallel(2, "", v1alpha1.Join{Agent: "writer"}),
		MakeAgent("web").HandsOffTo("lead"),
		MakeAgent("papers").HandsOffTo("lead"),
		MakeAgent("writer").Terminator(),
	)
}

// recordResearch records the research team's run as the operator runs it: the lead fans out,
// each branch run answers once, the branches join when both ended, and the writer ends the run.
// It returns the run and its branch runs, as the cluster holds them once they ended.
func recordResearch(t testing.TB, store transcript.Store, p *workflow.Plan, size int) (*v1alpha1.AgentRun, []v1alpha1.AgentRun) {
	t.Helper()
	r := newRecorder(t, store, p, "research", "what is known about X")
	fan := workflow.StepResult{Agent: "lead", Result: workflow.Result{Output: "splitting up", Tokens: 100,
		Parallel: []workflow.Branch{{Agent: "web", Input: "search the web for X"}, {Agent: "papers", Input: "search papers on X"}}}}
	r.step(fan)
	st := r.run.Status
	if !workflow.Branching(&st) {
		t.Fatalf("recording: the lead did not fan out: %s", st.Phase)
	}
	runs := map[string]workflow.BranchRun{}
	var branches []v1alpha1.AgentRun
	for i, b := range st.Branches {
		bp, err := p.BranchPlan(&st, i)
		if err != nil {
			t.Fatal(err)
		}
		br := newRecorder(t, store, bp, b.Name, fan.Parallel[i].Input)
		br.now = r.now
		br.run.Spec.Branch = &v1alpha1.RunBranch{Parent: r.run.Name, Step: 1, Index: int32(i + 1), Agent: b.Agent, Depth: 1}
		br.step(workflow.StepResult{Agent: b.Agent, Result: workflow.Result{Output: b.Agent + " found " + strings.Repeat("y", size), Tokens: 30}})
		end := br.ended()
		branches = append(branches, *end)
		s := end.Status
		runs[b.Name] = workflow.BranchRun{Found: true, Phase: s.Phase, Reason: s.TerminationReason, Output: s.Output,
			Tokens: s.TokensUsed, Steps: s.StepCount, Handoffs: s.HandoffCount}
		r.now = br.now
	}
	d, _ := workflow.Join(p, st, runs, r.now)
	r.run.Status = d.Status
	r.keep()
	r.step(workflow.StepResult{Agent: "writer", Result: workflow.Result{Output: "the report", Tokens: 80}})
	return r.ended(), branches
}
