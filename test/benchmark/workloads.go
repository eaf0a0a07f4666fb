package benchmark

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	. "github.com/baton-dev/baton/test/builders"
)

// Output sizes of a step: a short answer, and a long one.
const (
	shortOutput = 32
	bigOutput   = 10 * 1024
)

// longRing is the number of agents the long run goes round.
const longRing = 20

// workload is one shape of work, run the same way by each controller.
type workload struct {
	name string
	// runs of steps handoffs each; every step takes delay and answers output bytes.
	runs, steps int
	delay       time.Duration
	output      int
	// long is one run round a ring of agents, which Baton ends MaxStepsExceeded.
	long bool
	// profile takes CPU profiles during the first repetition.
	profile bool
}

// workloads are the workloads, their run counts and the long run's steps divided by
// scale.
func workloads(scale int) []workload {
	n := func(v int) int { return max(v/scale, 1) }
	return []workload{
		{name: "W1", runs: n(200), steps: 10, output: shortOutput, profile: true},
		{name: "W1-big", runs: n(200), steps: 10, output: bigOutput},
		{name: "W2", runs: n(200), steps: 10, delay: time.Second, output: shortOutput},
		{name: "W3", runs: n(1000), steps: 10, delay: 2 * time.Second, output: shortOutput},
		{name: "long", runs: 1, steps: n(1000), output: bigOutput, long: true},
	}
}

// limit is how long the workload may take before the benchmark gives up.
func (w workload) limit() time.Duration {
	return 10*time.Minute + time.Duration(w.runs*w.steps)*(w.delay+50*time.Millisecond)
}

// subject is one controller under test, as the benchmark drives it.
type subject interface {
	// name is how reports name it: "baseline", "baton".
	name() string
	// reconciler is its controller's name in controller-runtime's metrics.
	reconciler() string
	// group and resource are its runs' API group and resource.
	group() string
	resource() string
	side() *side
	// prepare makes what the runs need in namespace ns, before the measurement.
	prepare(ctx context.Context, c client.Client, ns string, w workload) error
	// newRun is the workload's i-th run.
	newRun(ns string, i int, w workload) client.Object
	// verify checks that every run ended as the workload should, and returns the handoffs.
	verify(ctx context.Context, c client.Client, ns string, w workload) (int, error)
	// garbage lists the kinds the workload leaves in its namespace.
	garbage() []client.Object
}

func runName(i int) string { return fmt.Sprintf("run-%d", i) }

// baseline is the baseline controller as a subject.
type baseline struct{ s *side }

func (baseline) name() string       { return "baseline" }
func (baseline) reconciler() string { return baselineController }
func (baseline) group() string      { return baselineGV.Group }
func (baseline) resource() string   { return "baselineruns" }
func (b baseline) side() *side      { return b.s }

func (baseline) prepare(context.Context, client.Client, string, workload) error { return nil }

func (baseline) newRun(ns string, i int, w workload) client.Object {
	run := &BaselineRun{Spec: BaselineRunSpec{Steps: int32(w.steps), OutputBytes: int32(w.output),
		Input: fmt.Sprintf("task %d", i)}}
	run.Name, run.Namespace = runName(i), ns
	if w.delay > 0 {
		run.Spec.Delay = &metav1.Duration{Duration: w.delay}
	}
	return run
}

func (baseline) verify(ctx context.Context, c client.Client, ns string, w workload) (int, error) {
	list := &BaselineRunList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	handoffs := 0
	for _, r := range list.Items {
		if r.Status.Phase != baselineSucceeded || int(r.Status.Step) != w.steps {
			return 0, fmt.Errorf("baseline run %s is %q after %d steps", r.Name, r.Status.Phase, r.Status.Step)
		}
		handoffs += int(r.Status.Step)
	}
	if len(list.Items) != w.runs {
		return 0, fmt.Errorf("%d baseline runs, want %d", len(list.Items), w.runs)
	}
	return handoffs, nil
}

func (baseline) garbage() []client.Object { return []client.Object{&BaselineRun{}} }

// baton is Baton as a subject.
type baton struct{ s *side }

func (baton) name() string       { return "baton" }
func (baton) reconciler() string { return "agentrun" }
func (baton) group() string      { return v1alpha1.GroupVersion.Group }
func (baton) resource() string   { return "agentruns" }
func (b baton) side() *side      { return b.s }

// configName is the benchmark's AgentConfig in each namespace.
const configName = "bench"

func (b baton) prepare(ctx context.Context, c client.Client, ns string, w workload) error {
	cfg := chainConfig(ns, w)
	if w.long {
		cfg = ringConfig(ns, w)
	}
	if os.Getenv("BENCH_UNTRUSTED") != "" {
		// Every run is tainted from its input: each step is judged tainted.
		cfg.Spec.Untrusted = &v1alpha1.UntrustedSpec{Input: v1alpha1.Untrusted}
	}
	if os.Getenv("BENCH_GUARDRAIL") != "" {
		cfg.Spec.Guardrails = []v1alpha1.Guardrail{{Name: "allow", URL: allowing(),
			Stages: []v1alpha1.GuardrailStage{v1alpha1.StageModelInput, v1alpha1.StageOutput}}}
	}
	if err := c.Create(ctx, cfg); err != nil {
		return err
	}
	if os.Getenv("BENCH_QUOTA") != "" {
		if err := c.Create(ctx, benchQuota(ns)); err != nil {
			return err
		}
	}
	return waitObserved(ctx, c, cfg)
}

// allowing is the guardrail BENCH_GUARDRAIL gives the workloads' config: a service on loopback
// that allows every text, asked at every step's input and output.
var allowing = sync.OnceValue(func() string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"action":"allow"}`))
	}))
	return s.URL
})

// benchQuota is the AgentQuota BENCH_QUOTA puts in Baton's namespace: caps of the day's tokens
// and of running runs far above what a workload uses, so that every model call is checked
// against the namespace's caps and every run is admitted by them, and none is held.
func benchQuota(ns string) *v1alpha1.AgentQuota {
	q := &v1alpha1.AgentQuota{Spec: v1alpha1.AgentQuotaSpec{MaxRunningRuns: ptr.To[int32](100000), MaxTokensPerDay: ptr.To[int64](100_000_000_000_000)}}
	q.Name, q.Namespace = "bench", ns
	return q
}

// waitObserved waits until Baton has written the config's status for its generation: that
// write is Baton's, but not the workload's.
func waitObserved(ctx context.Context, c client.Client, cfg *v1alpha1.AgentConfig) error {
	deadline := time.Now().Add(time.Minute)
	for cfg.Status.ObservedGeneration != cfg.Generation || cfg.Generation == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("AgentConfig %s/%s not observed after a minute", cfg.Namespace, cfg.Name)
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err
		}
	}
	return nil
}

// chainConfig is a chain of w.steps Scripted agents: each answers and hands off to the next;
// the last, a terminator, ends the run with a signal. A run is w.steps steps.
func chainConfig(ns string, w workload) *v1alpha1.AgentConfig {
	var team []*AgentWrapper
	for i := range w.steps {
		name := agentName(i)
		turn := Says(outputText(name, w.output))
		agent := MakeAgent(name)
		if i < w.steps-1 {
			agent.HandsOffTo(agentName(i + 1))
			turn.HandOff(agentName(i + 1))
		} else {
			agent.Terminator()
			turn.Emits("DONE")
		}
		if w.delay > 0 {
			turn.Delay(w.delay)
		}
		team = append(team, agent.Script(turn))
	}
	return MakeConfig(configName, ns).Agents(team...).Signal("DONE", v1alpha1.ActionTerminate).
		Timeout(time.Hour).AgentTimeout(30 * time.Minute).Obj()
}

// ringConfig is a ring of agents, each handing off to the next, that runs until
// limits.maxSteps ends it; loop detection is loosened so that it does not end it first.
func ringConfig(ns string, w workload) *v1alpha1.AgentConfig {
	var team []*AgentWrapper
	for i := range longRing {
		next := agentName((i + 1) % longRing)
		team = append(team, MakeAgent(agentName(i)).HandsOffTo(next).
			Script(Says(outputText(agentName(i), w.output)).HandOff(next)))
	}
	fifty := ptr.To[int32](50)
	return MakeConfig(configName, ns).Agents(team...).MaxSteps(int32(w.steps)).MaxHandoffs(10000).
		LoopDetection(nil, nil, ptr.To[int32](25), fifty, fifty).Timeout(time.Hour).Obj()
}

// liveConfig is one agent whose step takes wait: its runs stay live that long.
func liveConfig(ns string, wait time.Duration) *v1alpha1.AgentConfig {
	return MakeConfig(configName, ns).Agents(
		MakeAgent("a0").Terminator().Script(Says("done").Emits("DONE").Delay(wait)),
	).Signal("DONE", v1alpha1.ActionTerminate).Timeout(2 * wait).AgentTimeout(2 * wait).Obj()
}

func (baton) newRun(ns string, i int, _ workload) client.Object {
	return MakeRun(runName(i), ns).Config(configName).Input(fmt.Sprintf("task %d", i)).Obj()
}

func (baton) verify(ctx context.Context, c client.Client, ns string, w workload) (int, error) {
	list := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	want := v1alpha1.ReasonTerminated
	if w.long {
		want = v1alpha1.ReasonMaxStepsExceeded
	}
	handoffs := 0
	for _, r := range list.Items {
		if r.Status.TerminationReason != want || int(r.Status.StepCount) != w.steps {
			return 0, fmt.Errorf("AgentRun %s ended %q after %d steps: %s", r.Name, r.Status.TerminationReason,
				r.Status.StepCount, r.Status.TerminationMessage)
		}
		handoffs += int(r.Status.StepCount)
	}
	if len(list.Items) != w.runs {
		return 0, fmt.Errorf("%d AgentRuns, want %d", len(list.Items), w.runs)
	}
	return handoffs, nil
}

func (baton) garbage() []client.Object {
	return []client.Object{&v1alpha1.AgentRun{}, &v1alpha1.AgentConfig{}, &v1alpha1.AgentQuota{}, &appsv1.ControllerRevision{}, &corev1.Event{}}
}

// createRuns creates the workload's runs as a user would, a few at a time.
func createRuns(ctx context.Context, c client.Client, s subject, ns string, w workload) error {
	const parallel = 4
	next := make(chan int)
	errs := make(chan error, parallel)
	for range parallel {
		go func() {
			var err error
			for i := range next {
				if err == nil {
					err = c.Create(ctx, s.newRun(ns, i, w))
				}
			}
			errs <- err
		}()
	}
	for i := range w.runs {
		next <- i
	}
	close(next)
	var first error
	for range parallel {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// newNamespace makes a fresh namespace named after prefix.
func newNamespace(ctx context.Context, c client.Client, prefix string) (string, error) {
	ns := &corev1.Namespace{}
	ns.GenerateName = prefix + "-"
	if err := c.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}

// cleanup deletes what a workload left in namespace ns and waits until the API server holds none
// of it. envtest has no namespace controller: deleting the namespace would delete nothing.
func cleanup(ctx context.Context, c client.Client, s subject, ns string) error {
	for _, obj := range s.garbage() {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("deleting %T in %s: %w", obj, ns, err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, obj := range s.garbage() {
		for {
			list := &metav1.PartialObjectMetadataList{}
			gvk, err := c.GroupVersionKindFor(obj)
			if err != nil {
				return err
			}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
				return err
			}
			if len(list.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s left in %s after 5 minutes", gvk.Kind, ns)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}
