package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	. "github.com/baton-dev/baton/test/builders"
)

// The fan-out workload: parents whose lead fans out to branches at once, each a run of its own
// with one step of a worker, joined by a writer. It measures the wall time against the ideal
// (the agents' latency, all branches at once), Baton's mutating requests per step, and the
// join's latency: from the last branch's answer to the writer's call.

// fanOut is one shape of the workload.
type fanOut struct {
	name     string
	parents  int
	branches int
	// delay is each agent's latency.
	delay time.Duration
}

// fanOutWorkloads are the shapes make bench runs: instant agents, and agents of 1 s.
func fanOutWorkloads(scale int) []fanOut {
	parents := max(100/scale, 2)
	return []fanOut{
		{name: "fanout-instant", parents: parents, branches: 10},
		{name: "fanout-1s", parents: parents, branches: 10, delay: time.Second},
	}
}

// ideal is the wall time no controller beats: the lead, one round of branches all at once, and
// the writer, each taking the agents' latency.
func (f fanOut) ideal() time.Duration { return 3 * f.delay }

// steps are the workload's agent steps: each parent's fan-out and writer, and each branch's one.
func (f fanOut) steps() int { return f.parents * (2 + f.branches) }

// fanOutFigures are what one fan-out workload measured.
type fanOutFigures struct {
	f          fanOut
	wall       time.Duration
	controller requests
	// joins are, per parent, the time from its last branch's answer to its writer's call.
	joins []time.Duration
	cpu   float64
	// reconcileP50 and reconcileP99 are Baton's, in seconds (as the workloads').
	reconcileP50, reconcileP99 float64
}

// fanOutConfig is the team: the lead fans out to the branches, a worker each, and the writer
// joins them.
func fanOutConfig(ns string, f fanOut) *v1alpha1.AgentConfig {
	lead := Says("splitting up")
	for i := range f.branches {
		lead.FansOut("worker", fmt.Sprintf("part %d", i+1))
	}
	turn := func(t *TurnWrapper) *TurnWrapper {
		if f.delay > 0 {
			t.Delay(f.delay)
		}
		return t
	}
	cfg := MakeConfig("fanout", ns).Agents(
		MakeAgent("lead").HandsOffTo("worker", "writer").
			Parallel(int32(f.branches), v1alpha1.BudgetSplit, v1alpha1.Join{Agent: "writer"}).Script(turn(lead)),
		MakeAgent("worker").HandsOffTo("lead").Script(turn(Says("part done"))),
		MakeAgent("writer").Terminator().Script(turn(Says("joined"))),
	).Obj()
	cfg.Spec.Limits.MaxBranches = ptr.To(int32(f.branches))
	cfg.Spec.Limits.MaxSteps = ptr.To(int32(2*f.branches + 2))
	cfg.Spec.Limits.MaxHandoffs = ptr.To(int32(2*f.branches + 2))
	return cfg
}

// measureFanOut runs one fan-out workload on Baton, in a fresh namespace.
func (e *env) measureFanOut(ctx context.Context, f fanOut) (fanOutFigures, error) {
	out := fanOutFigures{f: f}
	s := baton{s: e.baton}
	ns, err := newNamespace(ctx, e.c, "baton-"+f.name)
	if err != nil {
		return out, err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx), e.c, s, ns) }()
	cfg := fanOutConfig(ns, f)
	if err := e.c.Create(ctx, cfg); err != nil {
		return out, err
	}
	if err := waitObserved(ctx, e.c, cfg); err != nil {
		return out, err
	}
	e.baton.tracker.follow(ns)
	before, err := e.before(ctx)
	if err != nil {
		return out, err
	}
	prof, err := e.startProfiles(ctx, "baton-"+f.name)
	if err != nil {
		return out, err
	}
	defer prof.wait()
	defer prof.stopLocal()
	began := time.Now()
	for i := range f.parents {
		run := MakeRun(runName(i), ns).Config(cfg.Name).Input("the question").Obj()
		if err := e.c.Create(ctx, run); err != nil {
			return out, err
		}
	}
	// Every branch ends before its parent's join: the last run to end is a parent.
	end, err := e.baton.tracker.waitEnded(ctx, f.parents*(1+f.branches), 10*time.Minute)
	if err != nil {
		return out, fmt.Errorf("%s: %w", f.name, err)
	}
	out.wall = end.Sub(began)
	prof.stopLocal()
	e.baton.writes.settle(ctx)
	after, err := e.after(ctx)
	if err != nil {
		return out, err
	}
	all := diffRequests(before.api, after.api, "apiserver_request_total", s.group(), nil)
	self := controlPlaneWrites(all, diffRequests(before.api, after.api, "apiserver_selfrequest_total", s.group(), nil))
	// The benchmark creates the parents; the branches' creates are Baton's.
	user := requests{"POST agentruns": float64(f.parents)}
	out.controller = all.minus(self).minus(user)
	out.cpu = after.cpu - before.cpu
	out.reconcileP50, out.reconcileP99 = reconcileTimes(before, after, labelsMatch{"controller": s.reconciler()})
	if err := e.verifyFanOut(ctx, ns, f); err != nil {
		return out, err
	}
	out.joins, err = joinLatencies(ctx, e, ns)
	return out, err
}

// verifyFanOut checks that every parent completed with all its branches joined.
func (e *env) verifyFanOut(ctx context.Context, ns string, f fanOut) error {
	runs := &v1alpha1.AgentRunList{}
	if err := e.c.List(ctx, runs, client.InNamespace(ns)); err != nil {
		return err
	}
	parents := 0
	for _, r := range runs.Items {
		if r.Spec.Branch != nil {
			continue
		}
		parents++
		if r.Status.TerminationReason != v1alpha1.ReasonCompleted || len(r.Status.Branches) != f.branches || r.Status.BranchSteps != int32(f.branches) {
			return fmt.Errorf("parent %s ended %s (%s) with %d branches, %d branch steps",
				r.Name, r.Status.TerminationReason, r.Status.TerminationMessage, len(r.Status.Branches), r.Status.BranchSteps)
		}
	}
	if want := f.parents * (1 + f.branches); len(runs.Items) != want || parents != f.parents {
		return fmt.Errorf("%d runs, %d parents; want %d runs, %d parents", len(runs.Items), parents, want, f.parents)
	}
	return nil
}

// joinLatencies reads, per parent, the time from its last branch's answer to its writer's call,
// from the transcript.
func joinLatencies(ctx context.Context, e *env, ns string) ([]time.Duration, error) {
	runs := &v1alpha1.AgentRunList{}
	if err := e.c.List(ctx, runs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	lastBranch := map[string]time.Time{}
	writerCall := map[string]time.Time{}
	for _, r := range runs.Items {
		recs, err := e.store.List(ctx, transcript.Query{RunUID: string(r.UID), Kinds: []transcript.Kind{transcript.KindStep}})
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if b := r.Spec.Branch; b != nil {
				if rec.Time.After(lastBranch[b.Parent]) {
					lastBranch[b.Parent] = rec.Time
				}
				continue
			}
			var body struct {
				Agent   string    `json:"agent"`
				Started time.Time `json:"started"`
			}
			if err := json.Unmarshal(rec.Body, &body); err != nil {
				return nil, err
			}
			if body.Agent == "writer" {
				writerCall[r.Name] = body.Started
			}
		}
	}
	var out []time.Duration
	for parent, call := range writerCall {
		if last, ok := lastBranch[parent]; ok {
			out = append(out, call.Sub(last))
		}
	}
	return out, nil
}

// fanOutReport is the fan-out workloads' figures.
func fanOutReport(figs []fanOutFigures) string {
	var b strings.Builder
	b.WriteString("\n### fan-out: parents whose lead fans out to branch runs at once, joined by a writer (Baton only)\n\n")
	b.WriteString("| workload | parents x branches | wall | ideal | mutating requests per step | join latency p50 / p99 | reconcile p50 / p99 | operator CPU per step |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range figs {
		steps := float64(f.f.steps())
		fmt.Fprintf(&b, "| %s | %d x %d | %.2f s | %.0f s | %.3f | %.0f / %.0f ms | %.1f / %.1f ms | %.2f ms |\n",
			f.f.name, f.f.parents, f.f.branches, f.wall.Seconds(), f.f.ideal().Seconds(), f.controller.total()/steps,
			float64(percentile(f.joins, 0.5).Milliseconds()), float64(percentile(f.joins, 0.99).Milliseconds()),
			1000*f.reconcileP50, 1000*f.reconcileP99, 1000*f.cpu/steps)
	}
	for _, f := range figs {
		fmt.Fprintf(&b, "\n%s: Baton's mutating requests: %s\n", f.f.name, f.controller.format(float64(f.f.steps()), "%.3f"))
	}
	return b.String()
}
