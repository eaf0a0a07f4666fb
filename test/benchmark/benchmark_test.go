// Package benchmark measures the operator against a real kube-apiserver and etcd: how many
// API writes each handoff costs (the API server's write rate is the limit at scale), and how
// many runs and handoffs per second one operator drives. Run with 'make bench'; figures are
// recorded in docs/benchmarks.md.
package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"k8s.io/utils/ptr"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers"
	. "github.com/baton-dev/baton/test/builders"
	"github.com/baton-dev/baton/transcript"
)

// writeCounter counts the requests that change something, by resource.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// bytes are the request bodies' bytes, by resource.
	bytes map[string]int64
	next  http.RoundTripper
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.mu.Lock()
		w.counts[resourceOf(r.URL.Path)]++
		w.bytes[resourceOf(r.URL.Path)] += max(r.ContentLength, 0)
		w.mu.Unlock()
	}
	return w.next.RoundTrip(r)
}

func (w *writeCounter) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.counts
	w.counts, w.bytes = map[string]int{}, map[string]int64{}
	return out
}

// takeBytes returns the bytes written by resource since the last take, and starts again.
func (w *writeCounter) takeBytes() (map[string]int, map[string]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts, bytes := w.counts, w.bytes
	w.counts, w.bytes = map[string]int{}, map[string]int64{}
	return counts, bytes
}

// resourceOf names what a request writes: "agentruns/status", "events", "leases".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	return parts[len(parts)-1]
}

type env struct {
	c      client.Client
	writes *writeCounter
	stop   func()
}

func start(b *testing.B, opts controllers.Options) *env {
	b.Helper()
	logf.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Fatal("KUBEBUILDER_ASSETS is not set: run 'make bench'")
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := te.Start()
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	counter := &writeCounter{counts: map[string]int{}, bytes: map[string]int64{}}
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.QPS, mgrCfg.Burst = 500, 1000
	mgrCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Cache: controllers.CacheOptions(),
		// Each benchmark starts its own manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if opts.Transcript, err = transcript.Open(ctx, filepath.Join(b.TempDir(), "transcript.db")); err != nil {
		b.Fatal(err)
	}
	if err := controllers.Setup(ctx, mgr, agents.Dependencies{}, clock.RealClock{}, opts); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return &env{c: c, writes: counter, stop: func() {
		cancel()
		<-done
		_ = te.Stop()
	}}
}

// helpdesk is the helpdesk sample's team in a namespace: 12 steps, 11 handoffs per run. Each
// step takes delay, as a model call would.
func helpdesk(ns string, delay time.Duration) *v1alpha1.AgentConfig {
	c := MakeConfig("helpdesk", ns).Agents(
		MakeAgent("orchestrator").HandsOffTo("memory", "ticketing", "network", "summarization").Script(
			Says("check memory").HandOff("memory").When("Ticket").Tokens(120),
			Says("analyse").HandOff("ticketing").When("NO_MEMORY_FOUND").Tokens(95),
			Says("diagnose").HandOff("network").When("analysis complete").Tokens(90),
			Says("STORE").HandOff("memory").When("Resolution:").Tokens(85),
			Says("summarise").HandOff("summarization").When("MEMORY_STORED").Tokens(80),
			Says("final update").HandOff("ticketing").When("WORKFLOW_COMPLETE").Tokens(75)),
		MakeAgent("memory").HandsOffTo("orchestrator").Script(
			Says("NO_MEMORY_FOUND").HandOff("orchestrator").When("check memory").Tokens(60),
			Says("MEMORY_STORED").HandOff("orchestrator").When("STORE").Tokens(55)),
		MakeAgent("ticketing").HandsOffTo("orchestrator").Terminator().Script(
			Says("analysis complete").HandOff("orchestrator").When("analyse").Tokens(140),
			Says("closed").Emits("TERMINATE_WORKFLOW").When("final update").Tokens(70)),
		MakeAgent("network").HandsOffTo("orchestrator").Script(Says("Resolution: keepalive").HandOff("orchestrator").Tokens(310)),
		MakeAgent("summarization").HandsOffTo("orchestrator").Script(Says("WORKFLOW_COMPLETE").HandOff("orchestrator").Tokens(160)),
	).Signal("TERMINATE_WORKFLOW", v1alpha1.ActionTerminate).Obj()
	for i := range c.Spec.Agents {
		for j := range c.Spec.Agents[i].Script {
			if delay > 0 {
				c.Spec.Agents[i].Script[j].Delay = v1alpha1.NewDuration(delay)
			}
		}
	}
	return c
}

// BenchmarkHelpdeskRuns starts n helpdesk runs at once and waits for all of them to end; with
// a step delay, every step takes that long, as a model call would.
func BenchmarkHelpdeskRuns(b *testing.B) {
	e := start(b, controllers.Options{MaxConcurrentReconciles: 8, MaxStepsInFlight: 512})
	defer e.stop()
	for _, c := range []struct {
		runs  int
		delay time.Duration
	}{{100, 0}, {500, 0}, {500, time.Second}} {
		b.Run(fmt.Sprintf("runs=%d/step=%s", c.runs, c.delay), func(b *testing.B) { benchmarkRuns(b, e, c.runs, c.delay) })
	}
}

func benchmarkRuns(b *testing.B, e *env, n int, delay time.Duration) {
	ctx := context.Background()
	var handoffs, steps, writes, statusWrites, events int
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		ns := &corev1.Namespace{}
		ns.GenerateName = "bench-"
		if err := e.c.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		if err := e.c.Create(ctx, helpdesk(ns.Name, delay)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second) // let the config's own status write settle
		e.writes.take()
		began := time.Now()
		for j := range n {
			run := MakeRun(fmt.Sprintf("ticket-%d", j), ns.Name).Config("helpdesk").Input(fmt.Sprintf("Ticket %d: VPN drops", j)).Obj()
			if err := e.c.Create(ctx, run); err != nil {
				b.Fatal(err)
			}
		}
		for {
			list := &v1alpha1.AgentRunList{}
			if err := e.c.List(ctx, list, client.InNamespace(ns.Name)); err != nil {
				b.Fatal(err)
			}
			ended, h, s := 0, 0, 0
			for _, r := range list.Items {
				if r.Status.Phase.Terminal() {
					ended++
					if r.Status.TerminationReason != v1alpha1.ReasonTerminated {
						b.Fatalf("%s ended %s: %s", r.Name, r.Status.TerminationReason, r.Status.TerminationMessage)
					}
				}
				h += int(r.Status.HandoffCount)
				s += int(r.Status.StepCount)
			}
			if ended == n {
				handoffs += h
				steps += s
				break
			}
			time.Sleep(500 * time.Millisecond) // a light poll: the API server is what is measured
		}
		elapsed += time.Since(began)
		counts := e.writes.take()
		for k, v := range counts {
			writes += v
			switch k {
			case "agentruns/status":
				statusWrites += v
			case "events":
				events += v
			}
		}
	}
	b.ReportMetric(float64(writes)/float64(handoffs), "writes/handoff")
	b.ReportMetric(float64(statusWrites)/float64(steps), "status-writes/step")
	b.ReportMetric(float64(events)/float64(n*b.N), "events/run")
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(handoffs)/elapsed.Seconds(), "handoffs/s")
}

// BenchmarkLongRun is one run of 1000 steps whose every output is 10 KB: the status must not
// grow with the run or with the outputs (the context window lives in the transcript). It
// reports the final status's size and the bytes of each status write.
func BenchmarkLongRun(b *testing.B) {
	e := start(b, controllers.Options{MaxConcurrentReconciles: 8, MaxStepsInFlight: 512})
	defer e.stop()
	ctx := context.Background()
	const ring, steps = 20, 1000
	for i := 0; i < b.N; i++ {
		ns := &corev1.Namespace{}
		ns.GenerateName = "long-"
		if err := e.c.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		var team []*AgentWrapper
		for a := range ring {
			output := fmt.Sprintf("agent %d: ", a) + strings.Repeat("finding ", 1250)
			team = append(team, MakeAgent(fmt.Sprintf("a%d", a)).HandsOffTo(fmt.Sprintf("a%d", (a+1)%ring)).
				Script(Says(output).HandOff(fmt.Sprintf("a%d", (a+1)%ring))))
		}
		fifty := int32(50)
		cfg := MakeConfig("long", ns.Name).Agents(team...).MaxSteps(steps).MaxHandoffs(10000).
			LoopDetection(nil, nil, ptr.To[int32](25), &fifty, &fifty).Obj()
		if err := e.c.Create(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second)
		e.writes.take()
		run := MakeRun("long", ns.Name).Config("long").Obj()
		if err := e.c.Create(ctx, run); err != nil {
			b.Fatal(err)
		}
		for {
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
				b.Fatal(err)
			}
			if run.Status.Phase.Terminal() {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if run.Status.TerminationReason != v1alpha1.ReasonMaxStepsExceeded || run.Status.StepCount != steps {
			b.Fatalf("ended %s after %d steps: %s", run.Status.TerminationReason, run.Status.StepCount, run.Status.TerminationMessage)
		}
		counts, bytes := e.writes.takeBytes()
		status, _ := json.Marshal(run.Status)
		b.ReportMetric(float64(len(status)), "status-bytes")
		b.ReportMetric(float64(bytes["agentruns/status"])/float64(counts["agentruns/status"]), "bytes/status-write")
	}
}
