package console

import (
	"bufio"
	"context"
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
)

// pricedRun is the pipeline's run after two steps on a priced endpoint, waiting at a gate.
func pricedRun(now time.Time) (*v1alpha1.AgentRun, []records.Record) {
	run := waitingRun(now)
	run.Status.StepCount, run.Status.Cost, run.Status.Currency = 2, "0.000315", "USD"
	run.Status.HandoffSequence = []v1alpha1.HandoffRecord{
		{Step: 1, From: "planner", To: "gmail", Outcome: v1alpha1.OutcomeHandoff, Tokens: 300, Cost: "0.00021", Time: metav1.NewTime(now.Add(-50 * time.Second))},
		{Step: 2, From: "gmail", To: "analysis", Outcome: v1alpha1.OutcomeHandoff, Tokens: 100, Cost: "0.000105", Time: metav1.NewTime(now.Add(-40 * time.Second))},
	}
	return run, []records.Record{
		stepRecord(1, now.Add(-50*time.Second), map[string]any{"agent": "planner", "output": "Plan: 1) gmail: invoices", "handoff": "gmail",
			"tokens": 300, "cost": "0.00021", "currency": "USD"}),
		stepRecord(2, now.Add(-40*time.Second), map[string]any{"agent": "gmail", "output": "3 invoices", "handoff": "analysis",
			"tokens": 100, "cost": "0.000105", "currency": "USD"}),
	}
}

// cell is what the page's element of class class in the row that mentions row says, tags left out.
func cell(t *testing.T, body, row, class string) string {
	t.Helper()
	for _, tr := range strings.Split(body, "<tr") {
		if !strings.Contains(tr, row) {
			continue
		}
		m := regexp.MustCompile(`class="` + class + `"[^>]*>(.*?)</td>`).FindStringSubmatch(tr)
		if m != nil {
			return html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], ""))
		}
	}
	return ""
}

func TestTheRunsListARunsPageAndItsStepsShowWhatTheyCost(t *testing.T) {
	now := time.Now()
	run, recs := pricedRun(now)
	unpriced := waitingRun(now)
	unpriced.Name = "unpriced"
	s, _ := newConsole(t, true, pipeline(), run, unpriced)
	s.opts.Transcripts = transcripts{"review/vendor-review": recs}

	_, body := get(t, s, "/runs")
	if got := cell(t, body, `href="/runs/review/vendor-review"`, "cost"); got != "0.000315 USD" {
		t.Errorf("the runs list shows the run's cost as %q, want 0.000315 USD", got)
	}
	if got := cell(t, body, `href="/runs/review/unpriced"`, "cost"); got != "" {
		t.Errorf("the runs list shows a cost %q for a run on no priced endpoint", got)
	}

	_, body = get(t, s, "/runs/review/vendor-review")
	if !strings.Contains(body, `<dt>Cost</dt><dd id="run-cost">0.000315 USD</dd>`) {
		t.Errorf("the run's page does not show its cost in its summary:\n%s", body)
	}
	if !strings.Contains(body, `<th scope="col">Cost (USD)</th>`) {
		t.Error("the timeline has no cost column in the run's currency")
	}
	for step, want := range map[string]string{"1": "0.00021", "2": "0.000105"} {
		if got := cell(t, body, `aria-label="Step `+step+` transcript"`, "cost"); got != want {
			t.Errorf("step %s costs %q on the timeline, want %s", step, got, want)
		}
	}

	_, body = get(t, s, "/runs/review/vendor-review/steps/2")
	if !strings.Contains(body, "<dt>Cost</dt><dd>0.000105 USD</dd>") {
		t.Errorf("the step's page does not show its cost:\n%s", body)
	}
}

// queuedRun is a run waiting in its namespace's queue, as the operator says why.
func queuedRun(name string, now time.Time, message string) *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "review", CreationTimestamp: metav1.NewTime(now)},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "vendor-review"}, Input: "Review vendor Initech"}}
	run.Status.Phase = v1alpha1.PhaseQueued
	run.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonQuotaExceeded, Message: message, LastTransitionTime: metav1.NewTime(now)}}
	return run
}

func TestAQueuedRunSaysWhatItWaitsFor(t *testing.T) {
	now := time.Now()
	message := `quota "team-a": 20 of 20 runs running; place 3 of 5`
	long := queuedRun("long", now.Add(-time.Second), strings.Repeat("x", 2000))
	s, _ := newConsole(t, true, pipeline(), waitingRun(now), queuedRun("initech", now, message), long)

	_, body := get(t, s, "/runs")
	text := html.UnescapeString(body)
	for _, want := range []string{
		`<span class="phase phase-queued">Queued</span>`,
		`<span class="queue-reason">QuotaExceeded</span> <span class="queue-message">` + message + `</span>`,
		`<option>Queued</option>`, // the phase filter offers it
		`class="queued-count" href="/runs?config=&namespace=&phase=Queued">2 queued</a>`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the runs list lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, strings.Repeat("x", maxQueueMessage+1)) {
		t.Error("the runs list shows a queued run's message unbounded")
	}

	_, body = get(t, s, "/runs?phase=Queued")
	if !strings.Contains(body, "2 runs") || strings.Contains(body, `href="/runs/review/vendor-review"`) || strings.Contains(body, "queued-count") {
		t.Errorf("the queued runs' filter:\n%s", body)
	}

	_, body = get(t, s, "/runs/review/initech")
	if want := `<strong>Queued (QuotaExceeded):</strong> ` + message; !strings.Contains(html.UnescapeString(body), want) {
		t.Errorf("the queued run's page does not say %q:\n%s", want, body)
	}
	if !strings.Contains(body, "No steps yet: the run is queued.") {
		t.Error("the queued run's timeline does not say why it has no steps")
	}
	_, body = get(t, s, "/runs/review/vendor-review")
	if strings.Contains(body, `class="queued"`) {
		t.Error("a run waiting at a gate is shown as queued")
	}
}

// endpoints are a ModelEndpoint of namespace review in use and a ClusterModelEndpoint not yet
// ready, as the operator writes their status.
func endpoints(now time.Time) []client.Object {
	ns := &v1alpha1.ModelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "review", CreationTimestamp: metav1.NewTime(now)},
		Spec: v1alpha1.ModelEndpointSpec{Provider: v1alpha1.ProviderOpenAI, URL: "https://api.example.com/v1", Currency: "USD",
			Limits: &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To[int64](500), TokensPerMinute: ptr.To[int64](200000), MaxConcurrent: ptr.To[int32](64)},
			Prices: []v1alpha1.ModelPrice{{Model: "gpt-4o-mini", Input: "0.15", CachedInput: "0.075", Output: "0.60"}}},
		Status: v1alpha1.ModelEndpointStatus{RequestsLastMinute: 12, TokensLastMinute: 3400, InFlight: 1, Waiting: 2, RateLimited: 5,
			EffectiveLimits: &v1alpha1.EndpointLimits{RequestsPerMinute: ptr.To[int64](300), TokensPerMinute: ptr.To[int64](150000), MaxConcurrent: ptr.To[int32](64)},
			Conditions:      []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(now)}}}}
	cluster := &v1alpha1.ClusterModelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "shared", CreationTimestamp: metav1.NewTime(now)},
		Spec: v1alpha1.ModelEndpointSpec{Provider: v1alpha1.ProviderOpenAI, URL: "https://shared.example.com/v1"},
		Status: v1alpha1.ModelEndpointStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SecretMissing",
			Message: "Secret llm is not in the operator's namespace", LastTransitionTime: metav1.NewTime(now)}}}}
	return []client.Object{ns, cluster}
}

func TestTheEndpointsPageShowsEachEndpointsLimitsAndUse(t *testing.T) {
	s, _ := newConsole(t, true, endpoints(time.Now())...)
	code, body := get(t, s, "/endpoints")
	if code != http.StatusOK {
		t.Fatalf("endpoints page: %d\n%s", code, body)
	}
	text := html.UnescapeString(body)
	for row, wants := range map[string][]string{
		`data-endpoint="review/llm"`: {
			">review</td>", "12 requests, 3400 tokens", "1 in flight, 2 waiting", `<td data-label="429s">5</td>`,
			"500 requests/min, 200000 tokens/min, 64 at once", "300 requests/min, 150000 tokens/min, 64 at once",
			"gpt-4o-mini: 0.15 in, 0.075 cached, 0.60 out", "USD per million tokens", "Ready True (Ready)",
		},
		`data-endpoint="shared"`: {
			"cluster (ClusterModelEndpoint)", "0 requests, 0 tokens", "none set", "none known yet", "none: its steps cost nothing",
			`<span class="condition false">Ready False (SecretMissing): Secret llm is not in the operator's namespace</span>`,
		},
	} {
		tr := rowOf(text, row)
		for _, want := range wants {
			if !strings.Contains(tr, want) {
				t.Errorf("the row of %s lacks %q:\n%s", row, want, tr)
			}
		}
	}
	if !strings.Contains(body, "cluster=true") || !strings.Contains(body, "watch=endpoints") {
		t.Error("the page does not follow the endpoints it lists")
	}
}

func TestAnEndpointListTheUserMayNotReadIsANoteNotAnError(t *testing.T) {
	forbidden := interceptAccess(true)
	forbidden.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*v1alpha1.ClusterModelEndpointList); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "clustermodelendpoints"}, "",
				errors.New(`User "alice" cannot list resource "clustermodelendpoints" in API group "agents.baton.dev" at the cluster scope`))
		}
		return c.List(ctx, list, opts...)
	}
	s, _ := newConsoleWith(t, forbidden, endpoints(time.Now())...)
	code, body := get(t, s, "/endpoints")
	if code != http.StatusOK {
		t.Fatalf("endpoints page: %d\n%s", code, body)
	}
	text := html.UnescapeString(body)
	if !strings.Contains(text, `<p class="warning" role="status">You may not list ClusterModelEndpoints, so they are not shown: clustermodelendpoints.agents.baton.dev is forbidden: User "alice" cannot list resource "clustermodelendpoints"`) {
		t.Errorf("the page does not say the user may not list ClusterModelEndpoints:\n%s", body)
	}
	if strings.Contains(body, `class="error"`) || strings.Contains(body, `data-endpoint="shared"`) || !strings.Contains(body, `data-endpoint="review/llm"`) {
		t.Errorf("want the namespace's endpoint, no error and no cluster endpoint:\n%s", body)
	}
	if !strings.Contains(body, "cluster=false") {
		t.Error("the page watches the ClusterModelEndpoints it may not list")
	}
}

// rowOf is the table row of a page that mentions row.
func rowOf(body, row string) string {
	for _, tr := range strings.Split(body, "<tr") {
		if strings.Contains(tr, row) {
			return tr
		}
	}
	return ""
}

func TestTheEndpointsPageFollowsTheirStatus(t *testing.T) {
	objs := endpoints(time.Now())
	// The fake API server's watches start from now, not from a version: the test changes the
	// endpoint once the console watches the namespace's endpoints. Its lists have no version:
	// they are given one, as the API server's have.
	watching := make(chan struct{})
	var once sync.Once
	funcs := interceptAccess(true)
	funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		err := c.List(ctx, list, opts...)
		list.SetResourceVersion("1000")
		return err
	}
	funcs.Watch = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
		w, err := c.Watch(ctx, list, opts...)
		if _, ok := list.(*v1alpha1.ModelEndpointList); ok && err == nil {
			once.Do(func() { close(watching) })
		}
		return w, err
	}
	s, kube := newConsoleWith(t, funcs, objs...)
	// The events the page names, from the versions of the lists it was drawn from: opening it
	// is not news.
	_, body := get(t, s, "/endpoints")
	live := regexp.MustCompile(`data-live="([^"]+)"`).FindStringSubmatch(body)
	if len(live) < 2 || !strings.Contains(live[1], "rv=1000") {
		t.Fatalf("the page names no events to follow:\n%s", body)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	_, s.port, _ = strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+html.UnescapeString(live[1]), nil)
	req.AddCookie(&http.Cookie{Name: s.cookie(), Value: s.session})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || lines.Text() != ": live" {
		t.Fatalf("the stream did not start: %d %q", resp.StatusCode, lines.Text())
	}
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the console does not watch the endpoints")
	}

	// The operator writes the endpoint's use: the page is told.
	e := objs[0].(*v1alpha1.ModelEndpoint)
	e.Status.RequestsLastMinute = 13
	if err := kube.Update(ctx, e); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		if lines.Text() == "event: change" {
			return
		}
	}
	t.Fatalf("no change event before the stream ended: %v", lines.Err())
}

func TestAReplayRunsPageSaysWhatTheReplayFound(t *testing.T) {
	now := time.Now()
	run := queuedRun("check", now, "")
	run.Status.Conditions = nil
	run.Status.Phase, run.Status.TerminationReason = v1alpha1.PhaseSucceeded, v1alpha1.ReasonReplayed
	run.Spec.Replay = &v1alpha1.RunReplay{Run: "vendor-review"}
	run.Status.Replay = &v1alpha1.ReplayStatus{Run: "vendor-review", Diverged: 4,
		Recorded: v1alpha1.ReplayOutcome{Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonCompleted, Steps: 6, Tokens: 600},
		Replayed: v1alpha1.ReplayOutcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonMaxHandoffsExceeded, Steps: 3, Tokens: 300,
			Message: "handoff limit: handoff 3 of 3 reached"}}
	s, _ := newConsole(t, true, pipeline(), run)
	_, body := get(t, s, "/runs/review/check")
	text := html.UnescapeString(body)
	for _, want := range []string{
		`<dt>Replay of</dt><dd id="replay-of"><a href="/runs/review/vendor-review">vendor-review</a></dd>`,
		"<h2 id=\"replay-title\">Replay of vendor-review</h2>",
		"The paths part at handoff 4.",
		`<tr><th scope="row">Reason</th><td>Completed</td><td>MaxHandoffsExceeded</td></tr>`,
		`<tr><th scope="row">Tokens</th><td>600</td><td>300</td></tr>`,
		"The replayed run: handoff limit: handoff 3 of 3 reached",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the replay run's page does not say %q:\n%s", want, text)
		}
	}
}
