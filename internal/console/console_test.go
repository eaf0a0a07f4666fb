package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/transcriptclient"
	"github.com/baton-dev/baton/test/builders"
)

// transcripts are transcripts kept in memory, as the transcript API would give it.
type transcripts map[string][]records.Record

func (r transcripts) Records(_ context.Context, namespace, name string, step int32) (transcriptclient.Page, error) {
	var out []records.Record
	for _, rec := range r[namespace+"/"+name] {
		if step == 0 || rec.Step == step {
			out = append(out, rec)
		}
	}
	return transcriptclient.Page{Namespace: namespace, Run: name, Records: out}, nil
}

// Pages gives the records two at a time, as pages of a long run's transcript would come.
func (r transcripts) Pages(ctx context.Context, namespace, name string, step int32, each func(transcriptclient.Page) error) error {
	all, _ := r.Records(ctx, namespace, name, step)
	for i := 0; i < len(all.Records) || i == 0; i += 2 {
		page := all
		page.Records = all.Records[i:min(i+2, len(all.Records))]
		if err := each(page); err != nil {
			return err
		}
	}
	return nil
}

func (r transcripts) Stream(ctx context.Context, _, _ string, _ func(records.Record) error) (string, error) {
	<-ctx.Done()
	return "", nil
}

func stepRecord(step int32, at time.Time, body map[string]any) records.Record {
	data, _ := json.Marshal(body)
	return records.Record{Seq: int64(step), Kind: "step", Step: step, Time: at, Body: data}
}

// waitingRun is the two-gate pipeline's run, waiting at its plan gate after one step.
func waitingRun(now time.Time) *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "vendor-review", Namespace: "review", UID: "u1",
		CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		Annotations:       map[string]string{v1alpha1.AnnotationCreatedBy: "alice"}},
		Spec: v1alpha1.AgentRunSpec{ConfigRef: v1alpha1.ConfigReference{Name: "vendor-review"}, Input: "Review vendor Acme"}}
	run.Status = v1alpha1.AgentRunStatus{Phase: v1alpha1.PhaseAwaitingApproval, CurrentAgent: "gmail", StepCount: 1, HandoffCount: 1, TokensUsed: 300,
		StartTime:       &metav1.MicroTime{Time: now.Add(-time.Minute)},
		HandoffSequence: []v1alpha1.HandoffRecord{{Step: 1, From: "planner", To: "gmail", Outcome: v1alpha1.OutcomeHandoff, Tokens: 300, Time: metav1.NewTime(now.Add(-50 * time.Second))}},
		PendingApproval: &v1alpha1.PendingApproval{Gate: "plan", Since: metav1.NewMicroTime(now.Add(-50 * time.Second))}}
	return run
}

func pipeline() *v1alpha1.AgentConfig {
	return builders.MakeConfig("vendor-review", "review").Entrypoint("planner").Agents(
		builders.MakeAgent("planner").HandsOffTo("gmail"), builders.MakeAgent("gmail").HandsOffTo("analysis"),
		builders.MakeAgent("analysis").Terminator()).Gate("plan", "planner", 1).Obj()
}

// newConsole is a console over a fake API server that answers whether the user may act with allowed.
func newConsole(t *testing.T, allowed bool, objs ...client.Object) (*Server, client.WithWatch) {
	t.Helper()
	return newConsoleWith(t, interceptAccess(allowed), objs...)
}

// newConsoleWith is a console over a fake API server whose answers funcs intercept.
func newConsoleWith(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*Server, client.WithWatch) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, authorizationv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	now := time.Now()
	s, err := New(Options{Kube: kube, User: "alice", DefaultNamespace: "review", Transcripts: transcripts{
		"review/vendor-review": {stepRecord(1, now.Add(-50*time.Second), map[string]any{"agent": "planner", "provider": "Scripted",
			"input": "Review vendor Acme", "output": "Plan: 1) gmail: invoices", "handoff": "gmail", "tokens": 300, "latencyMs": 12})},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.host, s.port = "127.0.0.1", "8080"
	return s, kube
}

// get asks the console as the browser that opened its URL.
func get(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+path, nil)
	req.AddCookie(&http.Cookie{Name: s.cookie(), Value: s.session})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func post(t *testing.T, s *Server, path string, form url.Values, origin string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	req.AddCookie(&http.Cookie{Name: s.cookie(), Value: s.session})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

func TestGuardLetsInOnlyTheBrowserThatOpenedTheURL(t *testing.T) {
	s, _ := newConsole(t, true)
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s %s sent a CORS header", req.Method, req.URL)
		}
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s %s has no content security policy", req.Method, req.URL)
		}
		return rec
	}

	if rec := serve(httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/runs", nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("no cookie: %d, want 401", rec.Code)
	}
	if rec := serve(httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/?token=wrong", nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", rec.Code)
	}
	rec := serve(httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/?token="+s.token, nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/runs" {
		t.Fatalf("the printed URL: %d to %q, want a redirect to /runs that drops the token", rec.Code, rec.Header().Get("Location"))
	}
	cookie := rec.Result().Cookies()[0]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value != s.session || cookie.Value == s.token {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, a session secret that is not the URL's token", cookie)
	}
	// The URL works once: from history, or in another browser, it lets no one in.
	if rec := serve(httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/?token="+s.token, nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("the URL opened a second time: %d, want 401", rec.Code)
	}
	withToken := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/runs", nil)
	withToken.AddCookie(&http.Cookie{Name: s.cookie(), Value: s.token})
	if rec := serve(withToken); rec.Code != http.StatusUnauthorized {
		t.Errorf("the URL's token as a cookie: %d, want 401", rec.Code)
	}

	// A site whose name resolves to 127.0.0.1 (DNS rebinding) names itself in Host.
	req := httptest.NewRequest(http.MethodGet, "http://evil.example:8080/runs", nil)
	req.AddCookie(cookie)
	if rec := serve(req); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d, want 421", rec.Code)
	}
	req = httptest.NewRequest(http.MethodGet, "http://localhost:8080/runs", nil)
	req.AddCookie(cookie)
	if rec := serve(req); rec.Code != http.StatusOK {
		t.Errorf("localhost: %d, want 200", rec.Code)
	}
	for _, host := range []string{"127.0.0.1:9999", "[::1]:8080", "127.0.0.2:8080"} {
		req = httptest.NewRequest(http.MethodGet, "http://"+host+"/runs", nil)
		req.AddCookie(cookie)
		if rec := serve(req); rec.Code != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: %d, want 421", host, rec.Code)
		}
	}

	// A form posted from another site, or with no Origin, is refused before anything is done.
	for _, origin := range []string{"http://evil.example", "", "null", "http://127.0.0.1:9999"} {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/runs/review/vendor-review/decide",
			strings.NewReader("action=approve&gate=plan"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.AddCookie(cookie)
		if rec := serve(req); rec.Code != http.StatusForbidden {
			t.Errorf("POST with Origin %q: %d, want 403", origin, rec.Code)
		}
	}
}

func TestRunPageShowsTheGateTimelineAndTeam(t *testing.T) {
	now := time.Now()
	s, _ := newConsole(t, true, pipeline(), waitingRun(now))
	code, body := get(t, s, "/runs/review/vendor-review")
	if code != http.StatusOK {
		t.Fatalf("run page: %d\n%s", code, body)
	}
	for _, want := range []string{
		"Waiting at gate plan", "Plan: 1) gmail: invoices", // the plan to judge
		`name="action" value="approve"`, `name="action" value="revise"`, `<option value="replan">`,
		`href="/runs/review/vendor-review/steps/1"`, "planner → gmail", // the timeline, a step a click away
		"<svg", "planner → gmail: 1", // the team, with the handoff taken and its count
		"Created by", "alice", `data-live="/live?`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
}

func TestCreatorSeesWhyTheyMayNotApproveAGateThatNeedsSomeoneElse(t *testing.T) {
	cfg := pipeline()
	no := false
	cfg.Spec.Approvals[0].AllowSelfApproval = &no
	s, _ := newConsole(t, true, cfg, waitingRun(time.Now()))
	_, body := get(t, s, "/runs/review/vendor-review")
	if !strings.Contains(body, "You created this run, and gate plan needs an approver other than the run&#39;s creator") {
		t.Errorf("the run page does not say why alice may not approve:\n%s", body)
	}
	_, body = get(t, s, "/inbox")
	if strings.Contains(body, "vendor-review</a>") {
		t.Errorf("the inbox offers alice a gate she may not approve:\n%s", body)
	}
}

func TestInboxListsTheGatesTheUserMayApprove(t *testing.T) {
	s, _ := newConsole(t, true, pipeline(), waitingRun(time.Now()))
	_, body := get(t, s, "/inbox")
	for _, want := range []string{"1 waiting for you", "at gate plan", "Plan: 1) gmail: invoices", `name="back" value="/inbox"`} {
		if !strings.Contains(body, want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	none, _ := newConsole(t, false, pipeline(), waitingRun(time.Now()))
	if _, body := get(t, none, "/inbox"); !strings.Contains(body, "0 waiting for you") {
		t.Errorf("the inbox of someone without the approve verb lists gates:\n%s", body)
	}
}

func TestDecisionsAreTheAnnotationsKubectlUsersWrite(t *testing.T) {
	s, kube := newConsole(t, true, pipeline(), waitingRun(time.Now()))
	rec := post(t, s, "/runs/review/vendor-review/decide", url.Values{"action": {"revise"}, "gate": {"plan"},
		"revise": {"planner"}, "feedback": {"only Q3"}, "back": {"/inbox"}}, "http://127.0.0.1:8080")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/inbox?notice=") {
		t.Fatalf("revise: %d to %q\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	run := &v1alpha1.AgentRun{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "review", Name: "vendor-review"}, run); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{v1alpha1.AnnotationReject: "plan", v1alpha1.AnnotationRevise: "planner", v1alpha1.AnnotationFeedback: "only Q3"}
	for k, v := range want {
		if run.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, run.Annotations[k], v)
		}
	}

	// A bad form changes nothing, names the field, and keeps what was typed.
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"action": {"revise"}, "gate": {"plan"}, "revise": {"planner"}}, "feedback: say what to change"},
		{url.Values{"action": {"approve"}}, "gate: name the gate"},
		{url.Values{"action": {"approve"}, "gate": {"plan"}, "feedback": {strings.Repeat("x", 5000)}}, "feedback: must be at most 4096 characters"},
		{url.Values{"action": {"launch"}}, `action: &#34;launch&#34; is not one of`},
		{url.Values{"action": {"reply"}, "reply": {" "}}, "reply: write the answer"},
	} {
		rec := post(t, s, "/runs/review/vendor-review/decide", c.form, "http://127.0.0.1:8080")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%v: %d, want 400 saying %q", c.form, rec.Code, c.want)
		}
	}
	rec = post(t, s, "/runs/review/vendor-review/decide", url.Values{"action": {"approve"}, "gate": {"plan"}, "feedback": {strings.Repeat("y", 5000)}}, "http://127.0.0.1:8080")
	if !strings.Contains(rec.Body.String(), strings.Repeat("y", 5000)) {
		t.Error("a refused form lost what the user typed")
	}
}

func TestStartRunValidatesAndCreates(t *testing.T) {
	s, kube := newConsole(t, true, pipeline())
	rec := post(t, s, "/new", url.Values{"config": {"review/vendor-review"}, "input": {""}}, "http://127.0.0.1:8080")
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "input: write what the agents are to do") {
		t.Errorf("empty input: %d\n%s", rec.Code, rec.Body)
	}
	rec = post(t, s, "/new", url.Values{"config": {"review/vendor-review"}, "input": {"Review vendor Acme Corp"}, "name": {"acme"}}, "http://127.0.0.1:8080")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/runs/review/acme?") {
		t.Fatalf("start: %d to %q\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	run := &v1alpha1.AgentRun{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "review", Name: "acme"}, run); err != nil {
		t.Fatal(err)
	}
	if run.Spec.ConfigRef.Name != "vendor-review" || run.Spec.Input != "Review vendor Acme Corp" {
		t.Errorf("created %+v", run.Spec)
	}
}

func TestTeamCountsTheHandoffsTaken(t *testing.T) {
	run := waitingRun(time.Now())
	entries := []runview.Entry{
		{Kind: runview.EntryStep, Agent: "planner", To: "gmail"}, {Kind: runview.EntryStep, Agent: "gmail", To: "analysis"},
		{Kind: runview.EntryStep, Agent: "analysis", To: "planner"}, {Kind: runview.EntryStep, Agent: "planner", To: "gmail"},
	}
	tm := team(pipeline(), run, entries)
	if len(tm.Nodes) != 3 || tm.Nodes[0].Name != "planner" || !tm.Nodes[0].Entry {
		t.Fatalf("nodes %+v: want the three agents, the entrypoint first", tm.Nodes)
	}
	counts := map[string]int{}
	for _, e := range tm.Edges {
		counts[e.From+">"+e.To] = e.Count
		if e.X1 < 0 || e.Y1 < 0 || e.X2 > tm.Width || e.Y2 > tm.Height {
			t.Errorf("edge %s>%s leaves the picture", e.From, e.To)
		}
	}
	if counts["planner>gmail"] != 2 || counts["gmail>analysis"] != 1 || counts["analysis>planner"] != 1 {
		t.Errorf("counts %v", counts)
	}
	if _, ok := counts["gmail>planner"]; ok {
		t.Error("an edge no one allowed or took")
	}
}

// interceptAccess answers SelfSubjectAccessReviews as the API server would for a user who may
// do everything, or nothing.
func interceptAccess(allowed bool) interceptor.Funcs {
	return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
			review.Status.Allowed = allowed
			return nil
		}
		return c.Create(ctx, obj, opts...)
	}}
}

func TestADecisionIsForTheGateAsTheUserSawIt(t *testing.T) {
	now := time.Now()
	run := waitingRun(now)
	s, kube := newConsole(t, true, pipeline(), run)
	// The form was drawn when the gate opened at another time: the run went round and opened
	// a gate of the same name again, with other output to judge.
	rec := post(t, s, "/runs/review/vendor-review/decide", url.Values{"action": {"approve"}, "gate": {"plan"},
		"since": {stamp(now.Add(-time.Hour))}}, "http://127.0.0.1:8080")
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "the run moved on from the gate you judged") {
		t.Fatalf("stale approval: %d\n%s", rec.Code, rec.Body)
	}
	got := &v1alpha1.AgentRun{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "review", Name: "vendor-review"}, got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[v1alpha1.AnnotationApprove]; ok {
		t.Error("a stale approval was written")
	}
	// The page it answers with is the run's, which live updates fetch, not the form's target.
	if !strings.Contains(rec.Body.String(), `data-page="/runs/review/vendor-review"`) {
		t.Error("the refusal's page does not name the run's page")
	}

	rec = post(t, s, "/runs/review/vendor-review/decide", url.Values{"action": {"approve"}, "gate": {"plan"},
		"since": {stamp(run.Status.PendingApproval.Since.Truncate(time.Microsecond))}, "feedback": {"line one\r\nline two"}, "back": {"//evil.example/"}}, "http://127.0.0.1:8080")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/runs/review/vendor-review?") {
		t.Fatalf("approval: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "review", Name: "vendor-review"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[v1alpha1.AnnotationApprove] != "plan" || got.Annotations[v1alpha1.AnnotationFeedback] != "line one\nline two" {
		t.Errorf("annotations %v: want approve=plan and the feedback with the browser's CRLF as LF", got.Annotations)
	}
}

func TestTeamPutsTheCountsOfTwoWayHandoffsApart(t *testing.T) {
	cfg := builders.MakeConfig("coding", "dev").Entrypoint("coder").Agents(
		builders.MakeAgent("coder").HandsOffTo("reviewer"), builders.MakeAgent("reviewer").HandsOffTo("coder").Terminator()).Obj()
	entries := []runview.Entry{{Kind: runview.EntryStep, Agent: "coder", To: "reviewer"}, {Kind: runview.EntryStep, Agent: "reviewer", To: "coder"},
		{Kind: runview.EntryStep, Agent: "coder", To: "reviewer"}}
	tm := team(cfg, &v1alpha1.AgentRun{}, entries)
	if len(tm.Edges) != 2 {
		t.Fatalf("edges %+v", tm.Edges)
	}
	a, b := tm.Edges[0], tm.Edges[1]
	// Each count is outside the space between the two arrows, on its own arrow's side.
	side := func(e Edge, x, y float64) float64 { return (e.X2-e.X1)*(y-e.Y1) - (e.Y2-e.Y1)*(x-e.X1) }
	if side(a, a.LX, a.LY)*side(a, b.X1, b.Y1) >= 0 || side(b, b.LX, b.LY)*side(b, a.X1, a.Y1) >= 0 {
		t.Errorf("a count sits between the arrows: %+v %+v", a, b)
	}
	if d := (a.LX-b.LX)*(a.LX-b.LX) + (a.LY-b.LY)*(a.LY-b.LY); d < 20*20 {
		t.Errorf("the two counts are less than 20 px apart (%.0f px²)", d)
	}
}

func TestAQuestionWaitsInTheInboxAndIsAnswered(t *testing.T) {
	now := time.Now()
	run := waitingRun(now)
	run.Status.Phase, run.Status.PendingApproval = v1alpha1.PhaseAwaitingInput, nil
	run.Status.PendingInput = &v1alpha1.PendingInput{Agent: "gmail", Question: "Which mailbox: ap@ or vendors@?", Since: metav1.NewMicroTime(now)}
	s, kube := newConsole(t, true, pipeline(), run)
	_, body := get(t, s, "/inbox")
	for _, want := range []string{"1 waiting for you", "asks a question", "Which mailbox: ap@ or vendors@?", `name="action" value="reply"`} {
		if !strings.Contains(body, want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	rec := post(t, s, "/runs/review/vendor-review/decide", url.Values{"action": {"reply"}, "reply": {"vendors@"}, "back": {"/inbox"}}, "http://127.0.0.1:8080")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/inbox?") {
		t.Fatalf("reply: %d to %q\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	got := &v1alpha1.AgentRun{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: "review", Name: "vendor-review"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[v1alpha1.AnnotationReply] != "vendors@" {
		t.Errorf("annotations %v: want the reply", got.Annotations)
	}
}

func TestTheConsoleLooksWhereTheUserMayListRuns(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, authorizationv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	namespaces := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "review"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "finance"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
	}
	// The user may list runs in review and finance, not in every namespace.
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(namespaces...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				ns := review.Spec.ResourceAttributes.Namespace
				review.Status.Allowed = ns == "review" || ns == "finance"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	s, err := New(Options{Kube: kube, User: "alice", DefaultNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.scopes.get(context.Background()); strings.Join(got, ",") != "finance,review" {
		t.Errorf("scopes %v, want finance and review", got)
	}

	// Told where to look, it looks there.
	s, _ = New(Options{Kube: kube, Namespaces: []string{"kube-system"}})
	if got := s.scopes.get(context.Background()); strings.Join(got, ",") != "kube-system" {
		t.Errorf("scopes %v, want kube-system", got)
	}
}
