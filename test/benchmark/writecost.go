package benchmark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The API server's cost of one status write, by what the object's status holds: on a control
// plane of its own with no controller running, objects of each shape get the same small merge
// patches of their status (a counter and a 32-byte string, as a step's write changes), 8 at a
// time, and the API server's CPU seconds are read around them.

const (
	writeCostObjects = 100
	writeCostWrites  = 3000
)

// statusShape is one kind of object and status measured.
type statusShape struct {
	name string
	// object is the i-th object of the shape, before its status is set.
	object func(ns string, i int) client.Object
	// status is the merge patch that gives an object its status, write the patch of the k-th
	// write measured.
	status map[string]any
	write  func(k int) []byte
}

// writeCost is one shape's figures.
type writeCost struct {
	shape         string
	objectBytes   int
	cpuPerWrite   []float64 // seconds, one per round
	writesPerSecs []float64
}

// statusShapes are the baseline's status as a W1 run leaves it, Baton's as a run mid-way has it
// (four conditions, ten handoffs, each agent's steps), the same without its conditions, and a
// status of two fields.
func statusShapes() []statusShape {
	now := metav1.Now()
	agentRun := func(ns string, i int) client.Object {
		return &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%d", i), Namespace: ns},
			Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "chain"}, Input: "the question"}}
	}
	batonWrite := func(k int) []byte { return fmt.Appendf(nil, `{"status":{"stepCount":%d,"input":"%032d"}}`, k, k) }
	return []statusShape{
		{name: "baseline", object: func(ns string, i int) client.Object {
			return &BaselineRun{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%d", i), Namespace: ns}, Spec: BaselineRunSpec{Steps: 10}}
		}, status: baselineStatus(now),
			write: func(k int) []byte { return fmt.Appendf(nil, `{"status":{"step":%d,"lastOutput":"%032d"}}`, k, k) }},
		{name: "Baton", object: agentRun, status: batonStatus(now, true), write: batonWrite},
		{name: "Baton, no conditions", object: agentRun, status: batonStatus(now, false), write: batonWrite},
		{name: "Baton, two fields", object: agentRun,
			status: map[string]any{"status": map[string]any{"phase": v1alpha1.PhaseRunning, "stepCount": 10}}, write: batonWrite},
	}
}

// baselineStatus is the merge patch of the baseline's status after 10 handoffs.
func baselineStatus(now metav1.Time) map[string]any {
	history := make([]BaselineHandoff, 0, baselineHistory)
	for s := 1; s <= baselineHistory; s++ {
		history = append(history, BaselineHandoff{Step: int32(s), From: fmt.Sprintf("agent-%d", s), To: fmt.Sprintf("agent-%d", s+1),
			Time: metav1.NewMicroTime(now.Time)})
	}
	return map[string]any{"status": BaselineRunStatus{Phase: baselineRunning, Step: 10, CurrentAgent: "agent-11",
		LastOutput: strings.Repeat("y", 32), History: history, StartTime: &now}}
}

// batonStatus is the merge patch of Baton's status after 10 handoffs, with its conditions or not.
func batonStatus(now metav1.Time, conditions bool) map[string]any {
	started := metav1.NewMicroTime(now.Time)
	st := v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseRunning, CurrentAgent: "agent-6", ConfigRevision: "chain-5d8c6b7f9a",
		StepCount: 10, HandoffCount: 10, TokensUsed: 1000, Input: strings.Repeat("x", 32), StartTime: &started, AgentSteps: map[string]int32{}}
	for i := 1; i <= 10; i++ {
		st.AgentSteps[fmt.Sprintf("agent-%d", i)] = 1
		st.HandoffSequence = append(st.HandoffSequence, v1alpha1.HandoffRecord{Step: int32(i), From: fmt.Sprintf("agent-%d", i),
			To: fmt.Sprintf("agent-%d", i+1), Outcome: v1alpha1.OutcomeHandoff, Reason: "handoff", Time: now, Tokens: 100})
	}
	if conditions {
		for _, c := range []string{v1alpha1.ConditionProgressing, "Reconciling", "Ready", v1alpha1.ConditionConfigResolved} {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Running",
				Message: "running step 11, agent agent-6", LastTransitionTime: now})
		}
	}
	return map[string]any{"status": st}
}

// measureWriteCosts starts a control plane, and measures each shape rounds times, the shapes in
// turn within each round.
func measureWriteCosts(ctx context.Context, rounds int) ([]writeCost, error) {
	te, cfg, scheme, err := controlPlane()
	if err != nil {
		return nil, err
	}
	defer func() { _ = te.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	sc, err := newScraper(te, cfg)
	if err != nil {
		return nil, err
	}
	shapes := statusShapes()
	out := make([]writeCost, len(shapes))
	for round := range rounds {
		for i, s := range shapes {
			ns := fmt.Sprintf("writes-%d-%d", round, i)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return nil, err
			}
			bytes, cpu, rate, err := measureShape(ctx, c, sc, ns, s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			out[i].shape, out[i].objectBytes = s.name, bytes
			out[i].cpuPerWrite = append(out[i].cpuPerWrite, cpu)
			out[i].writesPerSecs = append(out[i].writesPerSecs, rate)
		}
	}
	return out, nil
}

// measureShape makes the shape's objects with their status, then writes them writeCostWrites
// times, 8 at a time; it returns an object's size, the API server's CPU per write and the writes a
// second.
func measureShape(ctx context.Context, c client.Client, sc *scraper, ns string, s statusShape) (int, float64, float64, error) {
	objs := make([]client.Object, writeCostObjects)
	status, err := json.Marshal(s.status)
	if err != nil {
		return 0, 0, 0, err
	}
	for i := range objs {
		objs[i] = s.object(ns, i)
		if err := c.Create(ctx, objs[i]); err != nil {
			return 0, 0, 0, err
		}
		if err := c.Status().Patch(ctx, objs[i], client.RawPatch(types.MergePatchType, status)); err != nil {
			return 0, 0, 0, err
		}
	}
	raw, err := json.Marshal(objs[0])
	if err != nil {
		return 0, 0, 0, err
	}
	before, err := sc.apiserver(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	profiled := profileAPIServer(ctx, sc, "writecost-"+strings.NewReplacer(",", "", " ", "-").Replace(s.name), writeCostProfileSeconds)
	start := time.Now()
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for g := range errs {
		wg.Go(func() {
			for k := g; k < writeCostWrites && errs[g] == nil; k += len(errs) {
				obj := objs[k%len(objs)].DeepCopyObject().(client.Object)
				errs[g] = c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, s.write(k+1)))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	<-profiled
	after, err := sc.apiserver(ctx)
	if err := errors.Join(append(errs, err)...); err != nil {
		return 0, 0, 0, err
	}
	cpu := after.total("process_cpu_seconds_total", nil) - before.total("process_cpu_seconds_total", nil)
	return len(raw), cpu / writeCostWrites, writeCostWrites / wall.Seconds(), nil
}

// writeCostReport is the shapes' figures, medians of the rounds, against the baseline's.
func writeCostReport(costs []writeCost) string {
	var b strings.Builder
	b.WriteString("\n### the API server's CPU per status write, by the status's shape (medians)\n\n")
	b.WriteString("| status | object bytes | API server CPU per write | / baseline's | writes/s, 8 at a time |\n|---|---|---|---|---|\n")
	base := median(costs[0].cpuPerWrite)
	for _, c := range costs {
		cpu := median(c.cpuPerWrite)
		fmt.Fprintf(&b, "| %s | %d | %.2f ms | %.2fx | %.0f |\n", c.shape, c.objectBytes, cpu*1000, cpu/base, median(c.writesPerSecs))
	}
	for _, c := range costs {
		ms := make([]string, len(c.cpuPerWrite))
		for i, v := range c.cpuPerWrite {
			ms[i] = fmt.Sprintf("%.2f", v*1000)
		}
		fmt.Fprintf(&b, "\n%s: %s ms per write, round by round", c.shape, strings.Join(ms, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

// writeCostProfileSeconds is how long the API server is profiled from a shape's first write:
// less than its writes take on this machine.
const writeCostProfileSeconds = 4
