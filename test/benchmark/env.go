package benchmark

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/internal/operator"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
)

// What both controllers run with: Baton's manager defaults, so that the baseline gets no edge
// from its settings.
const (
	// restQPS and restBurst bound each manager's API client.
	restQPS, restBurst = 500, 1000
	// reconcileWorkers is the manager's --max-concurrent-reconciles default.
	reconcileWorkers = 8
	// operatorNamespace is Baton's own namespace, where the keys of ClusterModelEndpoints are.
	operatorNamespace = "baton-system"
)

// env is one API server and etcd, with Baton and the baseline each on a manager of its own, in
// this process.
type env struct {
	te *envtest.Environment
	// c is the benchmark's own client: the user who creates and deletes runs.
	c      client.Client
	scrape *scraper
	// store is Baton's transcript.
	store transcript.Store
	baton *side
	base  *side
	stop  func()
}

// side is what the benchmark sees of one controller: the writes its manager sends, and the
// runs its informer has seen start and end.
type side struct {
	writes  *writeCounter
	tracker *tracker
}

// startEnv starts the control plane and both controllers. The transcript goes under dir.
func startEnv(dir string) (*env, error) {
	te, cfg, scheme, err := controlPlane()
	if err != nil {
		return nil, err
	}
	e := &env{te: te}
	if err := e.start(cfg, scheme, dir); err != nil {
		if e.stop != nil {
			e.stop()
		} else {
			_ = te.Stop()
		}
		return nil, err
	}
	return e, nil
}

// controlPlane starts an API server and etcd that serve Baton's CRDs and the baseline's, and
// the scheme that reads both.
func controlPlane() (*envtest.Environment, *rest.Config, *runtime.Scheme, error) {
	logf.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, nil, errors.New("KUBEBUILDER_ASSETS is not set: run 'make bench'")
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(operator.AddToScheme(scheme))
	addBaselineToScheme(scheme)
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases"), "testdata"},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := te.Start()
	return te, cfg, scheme, err
}

// newScraper reads the metrics of te's API server through cfg, and of its etcd.
func newScraper(te *envtest.Environment, cfg *rest.Config) (*scraper, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	sc := &scraper{api: kube.RESTClient()}
	if u := te.ControlPlane.Etcd.URL; u != nil {
		sc.etcdURL = strings.TrimSuffix(u.String(), "/") + "/metrics"
	}
	return sc, nil
}

// start makes the clients and starts both controllers; once it has set e.stop, e.stop undoes
// what it did.
func (e *env) start(cfg *rest.Config, scheme *runtime.Scheme, dir string) error {
	var err error
	if e.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if e.scrape, err = newScraper(e.te, cfg); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	store, err := sqlstore.Open(ctx, filepath.Join(dir, "transcript.db"))
	if err != nil {
		cancel()
		return err
	}
	e.store = store
	var wg sync.WaitGroup
	e.stop = func() {
		cancel()
		wg.Wait()
		_ = store.Close()
		_ = e.te.Stop()
	}

	e.baton = &side{writes: newWriteCounter(), tracker: newTracker(batonRunState)}
	batonMgr, err := newManager(cfg, scheme, e.baton.writes, operator.CacheOptions(nil, false))
	if err != nil {
		return err
	}
	batch, err := statusBatchPeriod()
	if err != nil {
		return err
	}
	inFlight, err := maxStepsInFlight()
	if err != nil {
		return err
	}
	// The fake model servers listen on 127.0.0.1, which the egress policy refuses unless it is
	// allowed, as the manager's --egress-allow=127.0.0.1/32 does.
	policy, err := egress.New([]string{"127.0.0.1/32"}, nil)
	if err != nil {
		return err
	}
	opNS := &corev1.Namespace{}
	opNS.Name = operatorNamespace
	if err := e.c.Create(ctx, opNS); err != nil {
		return err
	}
	if err := operator.Setup(ctx, batonMgr, agents.Dependencies{}, clock.RealClock{}, operator.Options{
		MaxConcurrentReconciles: reconcileWorkers, MaxStepsInFlight: inFlight, Transcript: store,
		StatusBatchPeriod: batch, Egress: policy, OperatorNamespace: operatorNamespace}); err != nil {
		return err
	}
	e.base = &side{writes: newWriteCounter(), tracker: newTracker(baselineRunState)}
	baseMgr, err := newManager(cfg, scheme, e.base.writes, cache.Options{})
	if err != nil {
		return err
	}
	if err := setupBaseline(baseMgr, reconcileWorkers); err != nil {
		return err
	}
	for _, mgr := range []ctrl.Manager{batonMgr, baseMgr} {
		wg.Go(func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "a manager stopped: %v\n", err)
			}
		})
	}
	if err := e.baton.tracker.attach(ctx, batonMgr, &v1alpha1.AgentRun{}); err != nil {
		return err
	}
	return e.base.tracker.attach(ctx, baseMgr, &BaselineRun{})
}

// newManager makes a manager whose API client counts its writes; metrics are not served (they
// are read from the registry in this process).
func newManager(cfg *rest.Config, scheme *runtime.Scheme, writes *writeCounter, cacheOpts cache.Options) (ctrl.Manager, error) {
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.QPS, mgrCfg.Burst = restQPS, restBurst
	mgrCfg.WrapTransport = writes.wrap
	return ctrl.NewManager(mgrCfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Cache: cacheOpts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
}

// writeCounter counts a client's requests that change something, and their bodies' bytes, by
// resource, as the client sends them.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
	bytes  map[string]int64
	// sent counts every write since the start, for settle.
	sent int64
}

func newWriteCounter() *writeCounter {
	return &writeCounter{counts: map[string]int{}, bytes: map[string]int64{}}
}

// wrap is a rest.Config WrapTransport: every client the manager makes counts here.
func (w *writeCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return &countingTransport{counter: w, next: next}
}

type countingTransport struct {
	counter *writeCounter
	next    http.RoundTripper
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		res := resourceOf(r.URL.Path)
		t.counter.mu.Lock()
		t.counter.counts[res]++
		t.counter.bytes[res] += max(r.ContentLength, 0)
		t.counter.sent++
		t.counter.mu.Unlock()
	}
	return t.next.RoundTrip(r)
}

// take returns the writes since the last take, by resource, and starts again.
func (w *writeCounter) take() (map[string]int, map[string]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts, bytes := w.counts, w.bytes
	w.counts, w.bytes = map[string]int{}, map[string]int64{}
	return counts, bytes
}

func (w *writeCounter) total() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

// How long the client must send no write for its writes to count as settled, and the longest
// settle waits for that.
const (
	settleQuiet = time.Second
	settleLimit = 15 * time.Second
)

// settle waits until the client has sent no write for settleQuiet (at most settleLimit): Events
// are sent after the status write that they follow.
func (w *writeCounter) settle(ctx context.Context) {
	deadline := time.Now().Add(settleLimit)
	last, since := w.total(), time.Now()
	for time.Now().Before(deadline) && time.Since(since) < settleQuiet {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if n := w.total(); n != last {
			last, since = n, time.Now()
		}
	}
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

// runState reads a run object: whether the controller has started it, and whether it ended.
type runState func(obj any) (started, ended bool, ok bool)

func batonRunState(obj any) (bool, bool, bool) {
	run, ok := obj.(*v1alpha1.AgentRun)
	if !ok {
		return false, false, false
	}
	return run.Status.Phase.Started(), run.Status.Phase.Terminal(), true
}

func baselineRunState(obj any) (bool, bool, bool) {
	run, ok := obj.(*BaselineRun)
	if !ok {
		return false, false, false
	}
	return run.Status.Phase != "", run.Status.Phase == baselineSucceeded, true
}

// tracker follows the runs of some namespaces through the controller's own informer: it sees
// each status the API server sends, within milliseconds, and costs the API server nothing more.
type tracker struct {
	state   runState
	mu      sync.Mutex
	ns      map[string]bool
	started map[types.NamespacedName]bool
	ended   map[types.NamespacedName]bool
	lastEnd time.Time
}

func newTracker(state runState) *tracker {
	return &tracker{state: state, started: map[types.NamespacedName]bool{}, ended: map[types.NamespacedName]bool{}}
}

// attach follows the informer of obj's kind in mgr's cache, once it has synced.
func (t *tracker) attach(ctx context.Context, mgr ctrl.Manager, obj client.Object) error {
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(wait) {
		return fmt.Errorf("the manager's cache did not sync")
	}
	inf, err := mgr.GetCache().GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	})
	return err
}

func (t *tracker) observe(obj any) {
	started, ended, ok := t.state(obj)
	o, isObj := obj.(client.Object)
	if !ok || !isObj {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ns[o.GetNamespace()] {
		return
	}
	key := client.ObjectKeyFromObject(o)
	if started {
		t.started[key] = true
	}
	if ended && !t.ended[key] {
		t.ended[key] = true
		t.lastEnd = time.Now()
	}
}

// follow starts following the runs of namespaces ns, forgetting any other.
func (t *tracker) follow(ns ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ns, t.started, t.ended, t.lastEnd = map[string]bool{}, map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}, time.Time{}
	for _, n := range ns {
		t.ns[n] = true
	}
}

// counts are the runs seen started and ended, and when the last one ended.
func (t *tracker) counts() (started, ended int, lastEnd time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.started), len(t.ended), t.lastEnd
}

// waitEnded waits until n runs have ended, and returns when the last one ended.
func (t *tracker) waitEnded(ctx context.Context, n int, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		started, ended, last := t.counts()
		if ended >= n {
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("after %s, %d of %d runs started and %d ended", limit, started, n, ended)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// statusBatchPeriod is Baton's --status-batch-period: the manager's default, or BENCH_STATUS_BATCH
// (0s measures Baton writing every step as it ends).
func statusBatchPeriod() (time.Duration, error) {
	raw := os.Getenv("BENCH_STATUS_BATCH")
	if raw == "" {
		return operator.DefaultStatusBatchPeriod, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("BENCH_STATUS_BATCH=%q: want a duration from 0s", raw)
	}
	return d, nil
}

// maxStepsInFlight is Baton's --max-steps-in-flight: the manager's default, or
// BENCH_MAX_STEPS_IN_FLIGHT.
func maxStepsInFlight() (int, error) {
	raw := os.Getenv("BENCH_MAX_STEPS_IN_FLIGHT")
	if raw == "" {
		return operator.DefaultMaxStepsInFlight, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("BENCH_MAX_STEPS_IN_FLIGHT=%q: want a whole number from 1", raw)
	}
	return n, nil
}
