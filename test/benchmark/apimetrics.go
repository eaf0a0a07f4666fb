package benchmark

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics read around each measurement: the API server's and etcd's own /metrics, and
// controller-runtime's registry in this process. Counters and histograms are diffed.

// Families kept from each source; the rest of a scrape is dropped as it is parsed.
var (
	apiFamilies = []string{"apiserver_request_total", "apiserver_selfrequest_total", "process_cpu_seconds_total",
		"apiserver_request_duration_seconds", "apiserver_request_body_size_bytes"}
	etcdFamilies  = []string{"process_cpu_seconds_total"}
	localFamilies = []string{"controller_runtime_reconcile_total", "controller_runtime_reconcile_time_seconds",
		"workqueue_depth", "baton_agent_steps_in_flight", "baton_agent_steps_rate_limited_total"}
)

// mutatingVerbs are the verbs of apiserver_request_total that change something.
var mutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// series is one labelled series of a family: a counter's or gauge's value, or a histogram.
type series struct {
	labels map[string]string
	// value is a counter's or gauge's value, or a histogram's count.
	value float64
	// sum and buckets (cumulative counts by upper bound) are a histogram's.
	sum     float64
	buckets []bucket
}

type bucket struct{ le, count float64 }

// metricSet is a scrape's series by family name.
type metricSet map[string][]series

// parseMetrics reads the Prometheus text format, keeping the families named.
func parseMetrics(r io.Reader, keep []string) (metricSet, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	list := make([]*dto.MetricFamily, 0, len(keep))
	for _, name := range keep {
		if f, ok := fams[name]; ok {
			list = append(list, f)
		}
	}
	return fromFamilies(list, keep), nil
}

// fromFamilies converts gathered families, keeping the families named.
func fromFamilies(fams []*dto.MetricFamily, keep []string) metricSet {
	wanted := map[string]bool{}
	for _, k := range keep {
		wanted[k] = true
	}
	out := metricSet{}
	for _, f := range fams {
		if !wanted[f.GetName()] {
			continue
		}
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				h := m.GetHistogram()
				s.value, s.sum = float64(h.GetSampleCount()), h.GetSampleSum()
				for _, b := range h.GetBucket() {
					s.buckets = append(s.buckets, bucket{le: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
				}
			}
			out[f.GetName()] = append(out[f.GetName()], s)
		}
	}
	return out
}

// labelsMatch is a series filter: every label given must have the value given.
type labelsMatch map[string]string

func (l labelsMatch) matches(labels map[string]string) bool {
	for k, v := range l {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// total sums the family's series that match.
func (m metricSet) total(name string, match labelsMatch) float64 {
	var t float64
	for _, s := range m[name] {
		if match.matches(s.labels) {
			t += s.value
		}
	}
	return t
}

// histogram merges the family's series that match: count, sum and cumulative buckets.
func (m metricSet) histogram(name string, match labelsMatch) (count, sum float64, buckets []bucket) {
	byLE := map[float64]float64{}
	for _, s := range m[name] {
		if !match.matches(s.labels) {
			continue
		}
		count += s.value
		sum += s.sum
		for _, b := range s.buckets {
			byLE[b.le] += b.count
		}
	}
	for le, c := range byLE {
		buckets = append(buckets, bucket{le: le, count: c})
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].le < buckets[j].le })
	return count, sum, buckets
}

// diffHistogram is a histogram's observations between two scrapes.
func diffHistogram(before, after metricSet, name string, match labelsMatch) (count, sum float64, buckets []bucket) {
	c0, s0, b0 := before.histogram(name, match)
	c1, s1, b1 := after.histogram(name, match)
	prev := map[float64]float64{}
	for _, b := range b0 {
		prev[b.le] = b.count
	}
	for _, b := range b1 {
		buckets = append(buckets, bucket{le: b.le, count: b.count - prev[b.le]})
	}
	return c1 - c0, s1 - s0, buckets
}

// quantile estimates the q-quantile of a histogram's observations as Prometheus'
// histogram_quantile does: find the bucket where the q-th observation falls, and interpolate
// linearly between its lower and upper bounds. Past the last finite bound it returns that bound.
func quantile(q, count float64, buckets []bucket) float64 {
	if count <= 0 || len(buckets) == 0 {
		return math.NaN()
	}
	rank := q * count
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if math.IsInf(b.le, +1) {
			return lower
		}
		if b.count >= rank {
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return lower
}

// requests are API requests counted at the API server, by "VERB resource[.group][/subresource]".
type requests map[string]float64

// requestKey names a request as kubectl names resources: "PATCH agentruns/status",
// "POST events.events.k8s.io". runGroup, the run resource's group, is left out.
func requestKey(labels map[string]string, runGroup string) string {
	res := labels["resource"]
	if g := labels["group"]; g != "" && g != runGroup {
		res += "." + g
	}
	if sub := labels["subresource"]; sub != "" {
		res += "/" + sub
	}
	return labels["verb"] + " " + res
}

// diffRequests counts the mutating requests of family name between two scrapes, by request;
// only those whose labels match.
func diffRequests(before, after metricSet, name, runGroup string, match labelsMatch) requests {
	count := func(m metricSet) requests {
		out := requests{}
		for _, s := range m[name] {
			if mutatingVerbs[s.labels["verb"]] && match.matches(s.labels) {
				out[requestKey(s.labels, runGroup)] += s.value
			}
		}
		return out
	}
	b, a := count(before), count(after)
	out := requests{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (r requests) total() float64 {
	var t float64
	for _, v := range r {
		t += v
	}
	return t
}

// minus is r less o, keeping what is left above zero.
func (r requests) minus(o requests) requests {
	out := requests{}
	for k, v := range r {
		if d := v - o[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// String lists the requests, most first: "PATCH agentruns/status 2200, POST events 400".
func (r requests) String() string { return r.format(1, "%.0f") }

// format lists the requests each divided by per.
func (r requests) format(per float64, verb string) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r[keys[i]] != r[keys[j]] {
			return r[keys[i]] > r[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s "+verb, k, r[k]/per))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// scraper reads the control plane's metrics and profiles, as the envtest admin.
type scraper struct {
	api rest.Interface
	// etcdURL is etcd's metrics endpoint, over plain HTTP.
	etcdURL string
}

// get reads an API server path (not a resource) with the admin's credentials.
func (s *scraper) get(ctx context.Context, path string, params map[string]string) ([]byte, error) {
	req := s.api.Get().AbsPath(path).SetHeader("Accept", "application/json, text/plain, */*")
	for k, v := range params {
		req = req.Param(k, v)
	}
	return req.DoRaw(ctx)
}

func (s *scraper) apiserver(ctx context.Context) (metricSet, error) {
	body, err := s.get(ctx, "/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseMetrics(bytes.NewReader(body), apiFamilies)
}

// etcd reads etcd's metrics; nil when they cannot be read.
func (s *scraper) etcd(ctx context.Context) metricSet {
	if s.etcdURL == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.etcdURL, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	m, err := parseMetrics(resp.Body, etcdFamilies)
	if err != nil {
		return nil
	}
	return m
}

// local reads controller-runtime's registry in this process.
func local() (metricSet, error) {
	fams, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	return fromFamilies(fams, localFamilies), nil
}
