package stored_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/replay/stored/storedtest"
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

// recordTicket records the helpdesk's ticket of steps steps with outputs of size bytes.
func recordTicket(t testing.TB, store transcript.Store, p *workflow.Plan, steps, size int) (*v1alpha1.AgentRun, int64) {
	t.Helper()
	r := storedtest.NewRecorder(t, store, p, "ns", "ticket", "helpdesk", "helpdesk-1", "my invoice is wrong", t0)
	for _, res := range storedtest.Ticket(steps, size) {
		r.Step(res)
	}
	return r.Ended(), r.Bytes
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
	r := storedtest.NewRecorder(t, store, p, "ns", "research", "research", "research-1", "what is known about X", t0)
	fan := workflow.StepResult{Agent: "lead", Result: workflow.Result{Output: "splitting up", Tokens: 100,
		Parallel: []workflow.Branch{{Agent: "web", Input: "search the web for X"}, {Agent: "papers", Input: "search papers on X"}}}}
	r.Step(fan)
	st := r.Run.Status
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
		br := storedtest.NewRecorder(t, store, bp, "ns", b.Name, "research", "research-1", fan.Parallel[i].Input, r.Now)
		br.Run.Spec.Branch = &v1alpha1.RunBranch{Parent: r.Run.Name, Step: 1, Index: int32(i + 1), Agent: b.Agent, Depth: 1}
		br.Step(workflow.StepResult{Agent: b.Agent, Result: workflow.Result{Output: b.Agent + " found " + strings.Repeat("y", size), Tokens: 30}})
		end := br.Ended()
		branches = append(branches, *end)
		s := end.Status
		runs[b.Name] = workflow.BranchRun{Found: true, Phase: s.Phase, Reason: s.TerminationReason, Output: s.Output,
			Tokens: s.TokensUsed, Steps: s.StepCount, Handoffs: s.HandoffCount}
		r.Now = br.Now
	}
	r.Join(runs)
	r.Step(workflow.StepResult{Agent: "writer", Result: workflow.Result{Output: "the report", Tokens: 80}})
	return r.Ended(), branches
}
