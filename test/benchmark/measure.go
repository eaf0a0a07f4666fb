package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// measurement is what one controller did on one workload, once.
type measurement struct {
	wall     time.Duration
	handoffs int
	// controller are the controller's mutating requests at the API server: every mutating
	// request but the benchmark's creates of runs and the API server's own.
	controller requests
	// user are the benchmark's creates of runs; self the API server's own writes (leases...).
	user, self requests
	// conflicts are the controller's requests refused with 409: a write computed from a stale
	// copy (Conflict), or a create of what exists (AlreadyExists).
	conflicts requests
	// reconciles, reconcileP50 and reconcileP99 (seconds) are controller-runtime's figures for
	// the controller.
	reconciles, reconcileP50, reconcileP99 float64
	// apiCPU and etcdCPU are the control plane's CPU seconds (etcdCPU NaN if unknown); cpu this
	// process's.
	apiCPU, etcdCPU, cpu float64
	peakRSS              uint64
	// objectBytes and statusBytes are one finished run's JSON size as the API server returns it.
	objectBytes, statusBytes int
	// statusWrites are the patches of the runs' status at the API server, statusLatency their mean
	// duration (seconds) there, bodyBytes the mean body of a patch of a run there (NaN if the API
	// server has no such metric).
	statusWrites, statusLatency, bodyBytes float64
	// clientStatusWrites and clientBodyBytes are the same as the controller's client sent them.
	clientStatusWrites int
	clientBodyBytes    float64
	// gapP50 and gapP99 are Baton's own time (seconds) from a step's answer to the next step's
	// call, read from the transcript (NaN for the baseline, which keeps none).
	gapP50, gapP99 float64
}

// probe is what is read before and after a measurement.
type probe struct {
	api, etcd, local metricSet
	cpu              float64
	// peakRSS, heap (the Go heap in use after a collection), stacks (goroutine stacks in use)
	// and goroutines are read after a measurement; rss, heap and stacks before it too, idle.
	peakRSS, rss, heap, stacks uint64
	goroutines                 int
}

// before reads the metrics, then starts the peak RSS count and reads this process's CPU time,
// so that reading the metrics counts in neither.
func (e *env) before(ctx context.Context) (probe, error) {
	var p probe
	var err error
	if p.api, err = e.scrape.apiserver(ctx); err != nil {
		return p, err
	}
	p.etcd = e.scrape.etcd(ctx)
	if p.local, err = local(); err != nil {
		return p, err
	}
	if err := resetPeakRSS(); err != nil {
		return p, fmt.Errorf("resetting the peak RSS: %w", err)
	}
	// Just reset, the peak is the resident memory now: the idle figure the runs add to.
	if p.rss, err = peakRSS(); err != nil {
		return p, err
	}
	p.heap, p.stacks = memInUse()
	p.cpu = cpuSeconds()
	return p, nil
}

// after reads this process's CPU time, peak RSS and heap, then the metrics.
func (e *env) after(ctx context.Context) (probe, error) {
	p := probe{cpu: cpuSeconds()}
	var err error
	if p.peakRSS, err = peakRSS(); err != nil {
		return p, err
	}
	p.goroutines = runtime.NumGoroutine()
	runtime.GC()
	p.heap, p.stacks = memInUse()
	if p.local, err = local(); err != nil {
		return p, err
	}
	if p.api, err = e.scrape.apiserver(ctx); err != nil {
		return p, err
	}
	p.etcd = e.scrape.etcd(ctx)
	return p, nil
}

// measure runs workload w on one controller, in a fresh namespace, and deletes what it made.
// With a profile name, it writes CPU profiles of this process and of the API server under
// profileDir.
func (e *env) measure(ctx context.Context, s subject, w workload, profile string) (measurement, error) {
	var m measurement
	ns, err := newNamespace(ctx, e.c, s.name()+"-"+strings.ToLower(w.name))
	if err != nil {
		return m, err
	}
	if err := s.prepare(ctx, e.c, ns, w); err != nil {
		return m, err
	}
	sd := s.side()
	sd.tracker.follow(ns)
	sd.writes.settle(ctx)
	before, err := e.before(ctx)
	if err != nil {
		return m, err
	}
	sd.writes.take()
	var prof *profiles
	if profile != "" {
		if prof, err = e.startProfiles(ctx, profile); err != nil {
			return m, err
		}
		defer prof.stopLocal()
	}

	began := time.Now()
	if err := createRuns(ctx, e.c, s, ns, w); err != nil {
		return m, err
	}
	end, err := sd.tracker.waitEnded(ctx, w.runs, w.limit())
	prof.stopLocal()
	if err != nil {
		return m, fmt.Errorf("%s on %s: %w", s.name(), w.name, err)
	}
	m.wall = end.Sub(began)
	sd.writes.settle(ctx)
	after, err := e.after(ctx)
	if err != nil {
		return m, err
	}
	m.peakRSS = after.peakRSS
	counts, bodies := sd.writes.take()
	if m.handoffs, err = s.verify(ctx, e.c, ns, w); err != nil {
		return m, err
	}
	if m.objectBytes, m.statusBytes, err = e.objectSize(ctx, s, ns, runName(0)); err != nil {
		return m, err
	}
	m.gapP50, m.gapP99 = math.NaN(), math.NaN()
	if _, ok := s.(baton); ok {
		gaps, err := handoffGaps(ctx, e.c, e.store, ns)
		if err != nil {
			return m, err
		}
		m.gapP50, m.gapP99 = percentile(gaps, 0.5).Seconds(), percentile(gaps, 0.99).Seconds()
	}
	prof.wait()
	m.fill(s, before, after)
	status := s.resource() + "/status"
	m.clientStatusWrites = counts[status]
	if counts[status] > 0 {
		m.clientBodyBytes = float64(bodies[status]) / float64(counts[status])
	}
	return m, cleanup(ctx, e.c, s, ns)
}

// reconcileTimes are the p50 and p99, in seconds, of the controller's reconciles between two
// probes, from controller-runtime's histogram.
func reconcileTimes(before, after probe, ctl labelsMatch) (p50, p99 float64) {
	count, _, buckets := diffHistogram(before.local, after.local, "controller_runtime_reconcile_time_seconds", ctl)
	return quantile(0.5, count, buckets), quantile(0.99, count, buckets)
}

// fill takes the figures that are differences of two probes.
func (m *measurement) fill(s subject, before, after probe) {
	group, resource := s.group(), s.resource()
	all := diffRequests(before.api, after.api, "apiserver_request_total", group, nil)
	m.self = controlPlaneWrites(all, diffRequests(before.api, after.api, "apiserver_selfrequest_total", group, nil))
	create := "POST " + resource
	m.user = requests{create: all[create]}
	m.controller = all.minus(m.user).minus(m.self)
	m.conflicts = diffRequests(before.api, after.api, "apiserver_request_total", group, labelsMatch{"code": "409"}).minus(m.user)

	ctl := labelsMatch{"controller": s.reconciler()}
	m.reconciles = after.local.total("controller_runtime_reconcile_total", ctl) - before.local.total("controller_runtime_reconcile_total", ctl)
	m.reconcileP50, m.reconcileP99 = reconcileTimes(before, after, ctl)

	m.apiCPU = after.api.total("process_cpu_seconds_total", nil) - before.api.total("process_cpu_seconds_total", nil)
	m.etcdCPU = math.NaN()
	if before.etcd != nil && after.etcd != nil {
		m.etcdCPU = after.etcd.total("process_cpu_seconds_total", nil) - before.etcd.total("process_cpu_seconds_total", nil)
	}
	m.cpu = after.cpu - before.cpu

	// A status write is a merge patch, an apply or an update of the status subresource.
	var latencyCount, latencySum float64
	for _, verb := range []string{"PATCH", "APPLY", "PUT"} {
		status := labelsMatch{"verb": verb, "resource": resource, "subresource": "status"}
		m.statusWrites += after.api.total("apiserver_request_total", status) - before.api.total("apiserver_request_total", status)
		n, sum, _ := diffHistogram(before.api, after.api, "apiserver_request_duration_seconds", status)
		latencyCount, latencySum = latencyCount+n, latencySum+sum
	}
	m.statusLatency = latencySum / latencyCount
	// The body-size metric is labelled by resource, not subresource: the runs themselves are
	// not written during a measurement, so their writes are the status writes.
	var bodyCount, bodySum float64
	for _, verb := range []string{"patch", "update"} {
		n, sum, _ := diffHistogram(before.api, after.api, "apiserver_request_body_size_bytes",
			labelsMatch{"group": group, "resource": resource, "verb": verb})
		bodyCount, bodySum = bodyCount+n, bodySum+sum
	}
	m.bodyBytes = math.NaN()
	if bodyCount > 0 {
		m.bodyBytes = bodySum / bodyCount
	}
}

// controlPlaneWrites are the control plane's own writes among all: those the API server counts
// as its own, and every lease write, as neither controller here elects a leader (the API server
// renews leases of its own that it does not always count as self requests).
func controlPlaneWrites(all, self requests) requests {
	out := requests{}
	for k, v := range self {
		out[k] = v
	}
	for k, v := range all {
		if strings.HasSuffix(k, " leases.coordination.k8s.io") {
			out[k] = v
		}
	}
	return out
}

// objectSize is the JSON size of a run, and of its status, as the API server returns it.
func (e *env) objectSize(ctx context.Context, s subject, ns, name string) (int, int, error) {
	body, err := e.scrape.get(ctx, fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s", s.group(), apiVersion(s), ns, s.resource(), name), nil)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s/%s: %w", ns, name, err)
	}
	var obj struct {
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return 0, 0, err
	}
	return len(body), len(obj.Status), nil
}

func apiVersion(s subject) string {
	if s.group() == baselineGV.Group {
		return baselineGV.Version
	}
	return "v1alpha1"
}

// profileDir is where CPU profiles go: bin/bench at the repository's root.
var profileDir = filepath.Join("..", "..", "bin", "bench")

// apiserverProfileSeconds is how long the API server's CPU profile lasts: the start of the
// window; the measurement waits for it before it deletes its runs.
const apiserverProfileSeconds = 10

// profiles are the CPU profiles of one measurement: this process's, and the API server's.
type profiles struct {
	local   *os.File
	apiDone chan struct{}
	paths   []string
}

// startProfiles starts profiling this process, and asks the API server for a profile of
// apiserverProfileSeconds. A profile that cannot be taken is reported, not fatal.
func (e *env) startProfiles(ctx context.Context, name string) (*profiles, error) {
	if err := os.MkdirAll(profileDir, 0o755); err != nil {
		return nil, err
	}
	p := &profiles{apiDone: make(chan struct{})}
	localPath := filepath.Join(profileDir, name+".cpu.pprof")
	f, err := os.Create(localPath)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		fmt.Printf("could not profile this process: %v\n", err)
	} else {
		p.local = f
		p.paths = append(p.paths, localPath)
	}
	api := profileAPIServer(ctx, e.scrape, strings.TrimPrefix(name, "baton-"), apiserverProfileSeconds)
	go func() {
		defer close(p.apiDone)
		if path := <-api; path != "" {
			p.paths = append(p.paths, path)
		}
	}()
	return p, nil
}

// profileAPIServer asks the API server for a CPU profile of seconds and saves it as
// apiserver-<name>.cpu.pprof under profileDir; a profile that cannot be taken is reported, not
// fatal. The channel gives the profile's path once it is saved, "" if it was not.
func profileAPIServer(ctx context.Context, sc *scraper, name string, seconds int) <-chan string {
	saved := make(chan string, 1)
	go func() {
		path := filepath.Join(profileDir, "apiserver-"+name+".cpu.pprof")
		body, err := sc.get(ctx, "/debug/pprof/profile", map[string]string{"seconds": strconv.Itoa(seconds)})
		if err == nil {
			err = os.MkdirAll(profileDir, 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, body, 0o644)
		}
		if err != nil {
			fmt.Printf("could not profile the API server for %s: %v\n", name, err)
			path = ""
		}
		saved <- path
	}()
	return saved
}

// writeHeapProfile writes this process's heap profile under profileDir, and its goroutines'
// stacks beside it (as text, grouped by stack).
func writeHeapProfile(name string) error {
	for _, p := range []struct{ kind, file string }{{"heap", ".heap.pprof"}, {"goroutine", ".goroutines.txt"}} {
		if err := writeProfile(p.kind, name+p.file); err != nil {
			return err
		}
	}
	return nil
}

// writeProfile writes one of this process's runtime profiles under profileDir: binary, or
// for goroutines as text.
func writeProfile(kind, file string) error {
	if err := os.MkdirAll(profileDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(profileDir, file)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	debug := 0
	if kind == "goroutine" {
		debug = 1
	}
	if err := pprof.Lookup(kind).WriteTo(f, debug); err != nil {
		_ = f.Close()
		return err
	}
	abs, _ := filepath.Abs(path)
	fmt.Printf("%s profile: %s\n", kind, abs)
	return f.Close()
}

// stopLocal ends this process's profile.
func (p *profiles) stopLocal() {
	if p == nil || p.local == nil {
		return
	}
	pprof.StopCPUProfile()
	_ = p.local.Close()
	p.local = nil
}

// wait waits for the API server's profile and prints where the profiles are.
func (p *profiles) wait() {
	if p == nil {
		return
	}
	<-p.apiDone
	for _, path := range p.paths {
		abs, _ := filepath.Abs(path)
		fmt.Printf("CPU profile: %s\n", abs)
	}
}
