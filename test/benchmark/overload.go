package benchmark

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/test/fakes"
)

// The overload workload: many runs from many namespaces share one model endpoint whose server
// allows R requests a minute and answers 429 beyond, as a provider does. Baton's pacer should
// keep the server busy (goodput near R), rarely overrun it (few 429s), fail no run for it, and
// share R fairly among the namespaces, although the runs are created namespace by namespace
// (a first-come-first-served line would serve the first namespaces' runs and starve the last).

// The overload at BENCH_SCALE 1; the scale divides the runs and R alike, so the drain takes the
// same few minutes at any scale.
const (
	overloadRuns       = 5000
	overloadNamespaces = 50
	overloadSteps      = 5
	// overloadRPM is R: 25,000 calls take 4.2 minutes at best.
	overloadRPM = 6000
	// overloadLatency is how long the server takes to answer a call it admits: a short chat
	// completion's time.
	overloadLatency = time.Second
	// fairShare is how many steps a namespace completes, at an equal share of R, in one of the
	// windows fairness is measured over (10 s at R = 6,000 a minute and 50 namespaces).
	fairShare = 20
)

// overload is the workload's shape.
type overload struct {
	runs, namespaces, steps int
	rpm                     int64
	latency                 time.Duration
}

// overloadAt is the overload at a scale: as many runs in each namespace, at least one.
func overloadAt(scale int) overload {
	perNamespace := max(overloadRuns/scale/overloadNamespaces, 1)
	return overload{runs: perNamespace * overloadNamespaces, namespaces: overloadNamespaces, steps: overloadSteps,
		rpm: max(overloadRPM/int64(scale), 60), latency: overloadLatency}
}

// calls are the model calls the workload makes: one a step.
func (o overload) calls() int { return o.runs * o.steps }

// ideal is the drain time at exactly R: every call at the server's limit.
func (o overload) ideal() time.Duration {
	return time.Duration(float64(o.calls()) / float64(o.rpm) * float64(time.Minute))
}

// fairWindow is the length of the windows fairness is measured over: the time the server takes
// to serve fairShare calls of every namespace.
func (o overload) fairWindow() time.Duration {
	return time.Duration(float64(fairShare*o.namespaces) / float64(o.rpm) * float64(time.Minute))
}

// busy is how many steps the endpoint completes in one of fairness's windows when it runs
// within 10% of R.
func (o overload) busy() int {
	return int(math.Round(0.9 * float64(o.rpm) * o.fairWindow().Minutes()))
}

// overloadFigures are what one overload measured.
type overloadFigures struct {
	o overload
	// drain is from the first create to the last run's end; created from the first create to
	// the last.
	drain, created time.Duration
	// reasons counts the runs by termination reason; rateFailed the runs that did not complete
	// and whose message speaks of rate limits; stepErrors the failed steps of all runs.
	reasons    map[string]int
	rateFailed int
	stepErrors int64
	// The server's count of its answers: 200s, 429s of its limits, and the most requests it
	// admitted within one minute.
	ok, limited, peakWindow int64
	// perMinute counts the 200s in each minute since the first request; goodput is the 200s a
	// minute over the steady part, as a fraction of R, and steadyFrom and steadyTo bound it
	// (since the first request).
	perMinute            []int
	goodput              float64
	steadyFrom, steadyTo time.Duration
	// limitedAt counts the 429s in each second since the first request that had any.
	limitedAt map[int]int
	// fair is how the namespaces shared the endpoint (see fairness).
	fair fairFigures
	// timeline is the drain every 10 s (see timeline).
	timeline string
	// firstStep is the longest any namespace waited from its first create to its first step's
	// end, and firstStepNS which namespace that was (by creation order); spread is from the
	// first namespace's last step to the last namespace's.
	firstStep   time.Duration
	firstStepNS int
	spread      time.Duration
	// peakRSS, cpu and apiCPU are this process's peak RSS and CPU seconds and the API server's
	// CPU seconds during the drain; controller Baton's mutating requests at the API server.
	peakRSS     uint64
	cpu, apiCPU float64
	controller  requests
	// endpoint is the ClusterModelEndpoint's status at the end; requeued the steps the
	// runner sent back into line after a 429 (baton_agent_steps_rate_limited_total).
	endpoint v1alpha1.ModelEndpointStatus
	requeued float64
}

// measureOverload runs the overload on Baton and deletes what it made.
func (e *env) measureOverload(ctx context.Context, o overload) (overloadFigures, error) {
	f := overloadFigures{o: o, reasons: map[string]int{}}
	ep, err := e.newSharedEndpoint(ctx, "bench-overload", o.steps, o.rpm, false)
	if err != nil {
		return f, err
	}
	defer func() { _ = ep.remove(context.WithoutCancel(ctx), e.c) }()
	ep.fake.Latency(o.latency)
	ep.fake.Limit(fakes.RateLimits{RequestsPerMinute: o.rpm})

	s := baton{s: e.baton}
	nss, err := e.overloadNamespaces(ctx, o, ep.name)
	defer func() {
		for _, ns := range nss {
			_ = cleanup(context.WithoutCancel(ctx), e.c, s, ns)
		}
	}()
	if err != nil {
		return f, err
	}
	e.baton.tracker.follow(nss...)
	e.baton.writes.settle(ctx)
	before, err := e.before(ctx)
	if err != nil {
		return f, err
	}
	prof, err := e.startProfiles(ctx, "baton-overload")
	if err != nil {
		return f, err
	}
	defer prof.stopLocal()

	// Namespace by namespace: all of the first one's runs, then the next one's.
	began := time.Now()
	watch := e.startSampler(ctx, ep, began)
	defer watch.end()
	createdAt := make([]time.Time, len(nss))
	per := o.runs / o.namespaces
	for i, ns := range nss {
		createdAt[i] = time.Now()
		if err := createRuns(ctx, e.c, s, ns, workload{runs: per}); err != nil {
			return f, err
		}
	}
	f.created = time.Since(began)
	end, err := e.baton.tracker.waitEnded(ctx, o.runs, 3*o.ideal()+10*time.Minute)
	prof.stopLocal()
	if err != nil {
		return f, fmt.Errorf("overload: %w", err)
	}
	f.drain = end.Sub(began)
	samples := watch.end()
	after, err := e.after(ctx)
	if err != nil {
		return f, err
	}
	f.operatorFigures(s, before, after)
	prof.wait()

	stats := ep.fake.Stats()
	f.ok, f.limited, f.peakWindow = stats.OK, stats.RateLimited, stats.PeakWindowRequests
	first, ok, limited := ep.seen.sorted()
	f.perMinute, f.goodput, f.steadyFrom, f.steadyTo = goodput(first, ok, o.rpm)
	f.limitedAt = secondsSince(first, limited)
	f.timeline = timeline(samples, began, ok, limited)
	if f.endpoint, err = ep.status(ctx, e.c); err != nil {
		return f, err
	}
	ends, err := e.overloadRuns(ctx, &f, nss)
	if err != nil {
		return f, err
	}
	f.fair = fairness(ends, createdAt, began, o.fairWindow(), o.busy())
	f.firstStep, f.firstStepNS, f.spread = latecomers(ends, createdAt)
	return f, nil
}

// overloadNamespaces makes the workload's namespaces, each with the team on the shared
// endpoint, observed by the operator. On an error it returns the namespaces made so far.
func (e *env) overloadNamespaces(ctx context.Context, o overload, endpoint string) ([]string, error) {
	nss := make([]string, 0, o.namespaces)
	for i := range o.namespaces {
		ns, err := newNamespace(ctx, e.c, fmt.Sprintf("baton-overload-%02d", i))
		if err != nil {
			return nss, err
		}
		nss = append(nss, ns)
		cfg := endpointTeam(ns, endpoint, o.steps)
		if err := e.c.Create(ctx, cfg); err != nil {
			return nss, err
		}
		if err := waitObserved(ctx, e.c, cfg); err != nil {
			return nss, err
		}
	}
	return nss, nil
}

// operatorFigures reads what the operator and the API server did between before and after:
// peak memory, CPU, the controller's requests and the steps sent back into line.
func (f *overloadFigures) operatorFigures(s baton, before, after probe) {
	f.peakRSS, f.cpu = after.peakRSS, after.cpu-before.cpu
	f.apiCPU = after.api.total("process_cpu_seconds_total", nil) - before.api.total("process_cpu_seconds_total", nil)
	all := diffRequests(before.api, after.api, "apiserver_request_total", s.group(), nil)
	f.controller = all.minus(requests{"POST " + s.resource(): all["POST "+s.resource()]}).
		minus(controlPlaneWrites(all, diffRequests(before.api, after.api, "apiserver_selfrequest_total", s.group(), nil)))
	f.requeued = after.local.total("baton_agent_steps_rate_limited_total", nil) - before.local.total("baton_agent_steps_rate_limited_total", nil)
}

// overloadRuns reads how each run ended into f, and returns when each namespace's steps ended,
// from the transcript, in order.
func (e *env) overloadRuns(ctx context.Context, f *overloadFigures, nss []string) ([][]time.Time, error) {
	ends := make([][]time.Time, len(nss))
	for i, ns := range nss {
		list := &v1alpha1.AgentRunList{}
		if err := e.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for _, r := range list.Items {
			reason := string(r.Status.TerminationReason)
			if r.Status.TerminationReason == v1alpha1.ReasonCompleted && int(r.Status.StepCount) != f.o.steps {
				reason += fmt.Sprintf(" after %d steps", r.Status.StepCount)
			}
			f.reasons[reason]++
			f.stepErrors += int64(r.Status.ErrorCount)
			if r.Status.TerminationReason != v1alpha1.ReasonCompleted && rateWords(r.Status.TerminationMessage) {
				f.rateFailed++
			}
			recs, err := e.store.List(ctx, transcript.Query{RunUID: string(r.UID), Kinds: []transcript.Kind{transcript.KindStep}})
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				ends[i] = append(ends[i], rec.Time)
			}
		}
		sort.Slice(ends[i], func(a, b int) bool { return ends[i][a].Before(ends[i][b]) })
	}
	return ends, nil
}

// rateWords reports whether a run's message speaks of rate limits.
func rateWords(msg string) bool {
	msg = strings.ToLower(msg)
	for _, w := range []string{"429", "rate limit", "ratelimit", "too many requests", "rate_limit"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// sample is the operator's state at one moment of the drain: its runs' reconciles waiting in
// the workqueue, its steps in flight (running, or waiting for the endpoint or a slot), and the
// endpoint's status (written every few seconds at most).
type sample struct {
	at                           time.Duration
	queued, steps                float64
	waiting, calling, lastMinute int64
}

// sampler reads the operator's state every second until stopped.
type sampler struct {
	stop    chan struct{}
	done    chan []sample
	once    sync.Once
	samples []sample
}

func (e *env) startSampler(ctx context.Context, ep *sharedEndpoint, began time.Time) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan []sample, 1)}
	go func() {
		var out []sample
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				s.done <- out
				return
			case <-ctx.Done():
				s.done <- out
				return
			case <-tick.C:
			}
			m, err := local()
			if err != nil {
				continue
			}
			x := sample{at: time.Since(began), queued: m.total("workqueue_depth", labelsMatch{"name": "agentrun"}),
				steps: m.total("baton_agent_steps_in_flight", nil)}
			obj := &v1alpha1.ClusterModelEndpoint{}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(ep.obj), obj); err == nil {
				x.waiting, x.calling, x.lastMinute = obj.Status.Waiting, obj.Status.InFlight, obj.Status.RequestsLastMinute
			}
			out = append(out, x)
		}
	}()
	return s
}

// end stops the sampler and returns its samples; again, it returns them again.
func (s *sampler) end() []sample {
	s.once.Do(func() {
		close(s.stop)
		s.samples = <-s.done
	})
	return s.samples
}
