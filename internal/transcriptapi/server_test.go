package transcriptapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/transcript/sqlstore"
	"github.com/baton-dev/baton/internal/transcriptclient"
	. "github.com/baton-dev/baton/test/builders"
)

// team is the namespace of the tests' runs.
const team = "team-a"

var t0 = time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)

// people are who the tests' API server knows: reader may get every run of team-a, the bot
// ServiceAccount's group run r only, and lister may list runs but get none; stranger may do
// nothing. Members of readers, as a client certificate names them, may get every run.
func people() *kubeAPI {
	return &kubeAPI{
		tokens: map[string]authenticationv1.UserInfo{
			"reader-token":   {Username: "reader"},
			"stranger-token": {Username: "stranger"},
			"lister-token":   {Username: "lister"},
			"bot-token":      {Username: "system:serviceaccount:ops:bot", Groups: []string{"system:serviceaccounts:ops"}},
		},
		rbac: map[string][]string{
			"reader":                           {"get"},
			"group:system:serviceaccounts:ops": {"get r"},
			"lister":                           {"list"},
			"group:readers":                    {"get"},
		},
	}
}

// transcriptAPI is the transcript API on a fake cluster: runs and config revisions in a fake
// client, as the manager's cache holds them, and their records in SQLite.
type transcriptAPI struct {
	h     *Handler
	runs  client.Client
	store transcript.Store
}

// newTranscriptAPI serves the API for the people kube knows, with the run r (ended, three
// records, its config pinned as relay-1) and objs.
func newTranscriptAPI(t *testing.T, kube *kubeAPI, objs ...client.Object) *transcriptAPI {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "transcript.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	r := runOf("r", v1alpha1.PhaseSucceeded)
	r.Status.TerminationReason, r.Status.ConfigRevision = v1alpha1.ReasonCompleted, "relay-1"
	objs = append(objs, r, revision("relay-1", relay().Spec))
	a := &transcriptAPI{store: store, runs: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
	a.record(t, r, transcript.Key{Kind: transcript.KindStep, Step: 1}, `{"agent":"a","output":"to b"}`)
	a.record(t, r, transcript.Key{Kind: transcript.KindDecision, Step: 1, Call: 1}, `{"gate":"check","decision":"Approved","by":"alice"}`)
	a.record(t, r, transcript.Key{Kind: transcript.KindStep, Step: 2}, `{"agent":"b","output":"done"}`)
	a.h = &Handler{Store: store, Runs: a.runs, Auth: kube.start(t), Poll: time.Millisecond}
	return a
}

// relay is the config the tests' runs pinned.
func relay() *v1alpha1.AgentConfig {
	return MakeConfig("relay", team).Agents(
		MakeAgent("a").HandsOffTo("b").Script(Says("to b").HandOff("b")),
		MakeAgent("b").Terminator().Script(Says("done")),
	).Obj()
}

// runOf is a run of team-a in phase.
func runOf(name string, phase v1alpha1.RunPhase) *v1alpha1.AgentRun {
	run := MakeRun(name, team).Config("relay").Obj()
	run.UID = types.UID("uid-" + run.Name)
	run.Status.Phase = phase
	return run
}

// revision is the operator's ControllerRevision of a pinned config.
func revision(name string, spec v1alpha1.AgentConfigSpec) *appsv1.ControllerRevision {
	raw, _ := json.Marshal(spec)
	rev := &appsv1.ControllerRevision{Revision: 1, Data: runtime.RawExtension{Raw: raw}}
	rev.Name, rev.Namespace = name, team
	return rev
}

// record appends a record of run to the transcript.
func (a *transcriptAPI) record(t *testing.T, run *v1alpha1.AgentRun, key transcript.Key, body string) {
	t.Helper()
	if _, err := a.store.Append(context.Background(), transcript.Record{Key: key, RunUID: string(run.UID),
		Namespace: run.Namespace, Run: run.Name, Time: t0, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// caller sets a request's credentials.
type caller func(*http.Request)

// bearer presents a token.
func bearer(token string) caller {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// certificate presents a client certificate on the TLS connection.
func certificate(cert tls.Certificate) caller {
	return func(r *http.Request) { r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert.Leaf}} }
}

// anonymous presents nothing.
func anonymous(*http.Request) {}

// get is a caller's GET of path.
func (a *transcriptAPI) get(as caller, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	as(req)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	a.h.ServeMux().ServeHTTP(rec, req)
	return rec
}

// refusalOf is the error the API answered.
func refusalOf(t *testing.T, rec *httptest.ResponseRecorder) Status {
	t.Helper()
	var s Status
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("answer %d %q is not an error as the API server shapes it: %v", rec.Code, rec.Body, err)
	}
	return s
}

// lines renders a page's records as "seq kind step body".
func lines(p transcriptclient.Page) []string {
	var out []string
	for _, r := range p.Records {
		out = append(out, fmt.Sprintf("%d %s %d %s", r.Seq, r.Kind, r.Step, r.Body))
	}
	return out
}

// A run's records are read by whoever may get the run, in order, with the run they belong to;
// anyone else is answered as the API server would answer them: 401 without credentials it
// knows, 403 without the get permission (whether or not the run exists), 404 for a run that
// does not exist to someone who may get it.
func TestWhoMayReadARunsTranscript(t *testing.T) {
	all := []string{`1 step 1 {"agent":"a","output":"to b"}`, `2 decision 1 {"gate":"check","decision":"Approved","by":"alice"}`,
		`3 step 2 {"agent":"b","output":"done"}`}
	forbidden := func(user, run, ns string) string {
		return fmt.Sprintf(`agentruns.agents.baton.dev %q is forbidden: User %q cannot get resource "agentruns" in API group "agents.baton.dev" in the namespace %q`, run, user, ns)
	}
	a := newTranscriptAPI(t, people())
	for name, tc := range map[string]struct {
		as      caller
		path    string
		code    int
		records []string
		message string
	}{
		"a reader who may get the run": {as: bearer("reader-token"), path: "/v1/namespaces/team-a/agentruns/r/records", code: http.StatusOK, records: all},
		"a ServiceAccount whose group may get the run": {as: bearer("bot-token"), path: "/v1/namespaces/team-a/agentruns/r/records",
			code: http.StatusOK, records: all},
		"a ServiceAccount whose group may get another run": {as: bearer("bot-token"), path: "/v1/namespaces/team-a/agentruns/other/records",
			code: http.StatusForbidden, message: forbidden("system:serviceaccount:ops:bot", "other", team)},
		"someone who may list runs but not get them": {as: bearer("lister-token"), path: "/v1/namespaces/team-a/agentruns/r/records",
			code: http.StatusForbidden, message: forbidden("lister", "r", team)},
		"a stranger": {as: bearer("stranger-token"), path: "/v1/namespaces/team-a/agentruns/r/records",
			code: http.StatusForbidden, message: forbidden("stranger", "r", team)},
		"a stranger, of a run that does not exist": {as: bearer("stranger-token"), path: "/v1/namespaces/team-a/agentruns/nope/records",
			code: http.StatusForbidden, message: forbidden("stranger", "nope", team)},
		"a reader, of a run that does not exist": {as: bearer("reader-token"), path: "/v1/namespaces/team-a/agentruns/nope/records",
			code: http.StatusNotFound, message: `agentruns.agents.baton.dev "nope" not found in namespace team-a`},
		"a reader, in a namespace she may not read": {as: bearer("reader-token"), path: "/v1/namespaces/team-b/agentruns/r/records",
			code: http.StatusForbidden, message: forbidden("reader", "r", "team-b")},
		"anyone unauthenticated": {as: anonymous, path: "/v1/namespaces/team-a/agentruns/r/records",
			code: http.StatusUnauthorized, message: "Unauthorized: present a bearer token or a client certificate, as for the API server"},
		"a token the API server does not know": {as: bearer("not-a-token"), path: "/v1/namespaces/team-a/agentruns/r/records",
			code: http.StatusUnauthorized, message: "Unauthorized: present a bearer token or a client certificate, as for the API server"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := a.get(tc.as, tc.path)
			if rec.Code != tc.code {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.code)
			}
			if tc.code != http.StatusOK {
				if s := refusalOf(t, rec); s.Code != tc.code || s.Message != tc.message {
					t.Fatalf("%+v; want %d %q", s, tc.code, tc.message)
				}
				return
			}
			var page transcriptclient.Page
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
				t.Fatal(err)
			}
			if page.Namespace != team || page.Run != "r" || page.UID != "uid-r" || page.Last != 3 {
				t.Errorf("page of %s/%s (%s), last %d; want team-a/r (uid-r), last 3", page.Namespace, page.Run, page.UID, page.Last)
			}
			if diff := cmp.Diff(tc.records, lines(page)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// trustClientCA gives the cluster a client CA, and waits until the API reads it: the operator
// reads it from kube-system in the background as it starts.
func trustClientCA(t *testing.T, kube *kubeAPI, a *transcriptAPI) {
	t.Helper()
	probe := certificate(kube.ca.issue(t, "reader"))
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return a.get(probe, "/v1/namespaces/team-a/agentruns/r/records").Code != http.StatusUnauthorized, nil
	}); err != nil {
		t.Fatalf("the cluster's client CA was not read: %v", err)
	}
}

// Callers with a client certificate are who it names when the cluster's client CA signed it,
// with its groups; a certificate another CA signed is refused.
func TestAClientCertificateOfTheClustersCAIsAccepted(t *testing.T) {
	kube := people()
	kube.ca = newCA(t, "kubernetes")
	a := newTranscriptAPI(t, kube)
	trustClientCA(t, kube, a)
	for name, tc := range map[string]struct {
		as   caller
		code int
	}{
		"a member of readers, by a certificate of the cluster's CA": {as: certificate(kube.ca.issue(t, "carl", "readers")), code: http.StatusOK},
		"someone else, by a certificate of the cluster's CA":        {as: certificate(kube.ca.issue(t, "dora")), code: http.StatusForbidden},
		"a member of readers, by a certificate of another CA":       {as: certificate(newCA(t, "elsewhere").issue(t, "carl", "readers")), code: http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			if rec := a.get(tc.as, "/v1/namespaces/team-a/agentruns/r/records"); rec.Code != tc.code {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.code)
			}
		})
	}
}

// A reader pages through a run's records: after a sequence number, one step's, so many at a
// time; the page says where to go on from. A query that makes no sense is refused, saying why;
// a transcript that cannot be read is a 503.
func TestAReaderPagesThroughARunsRecords(t *testing.T) {
	a := newTranscriptAPI(t, people())
	for name, tc := range map[string]struct {
		query   string
		seqs    []int64
		last    int64
		code    int
		message string
	}{
		"all of them":                  {seqs: []int64{1, 2, 3}, last: 3},
		"one step's":                   {query: "?step=1", seqs: []int64{1, 2}, last: 2},
		"those after the first":        {query: "?after=1", seqs: []int64{2, 3}, last: 3},
		"two at a time":                {query: "?limit=2", seqs: []int64{1, 2}, last: 2},
		"the next one after the first": {query: "?after=1&limit=1", seqs: []int64{2}, last: 2},
		"none after the last":          {query: "?after=3", last: 3},
		"after a negative number":      {query: "?after=-1", code: http.StatusBadRequest, message: `after: "-1" is not a record's sequence number`},
		"after a word":                 {query: "?after=start", code: http.StatusBadRequest, message: `after: "start" is not a record's sequence number`},
		"a step that is no number":     {query: "?step=one", code: http.StatusBadRequest, message: `step: "one" is not a step number`},
		"no records at a time":         {query: "?limit=0", code: http.StatusBadRequest, message: `limit: "0" is not between 1 and 1000`},
		"more than a page":             {query: "?limit=1001", code: http.StatusBadRequest, message: `limit: "1001" is not between 1 and 1000`},
	} {
		t.Run(name, func(t *testing.T) {
			rec := a.get(bearer("reader-token"), "/v1/namespaces/team-a/agentruns/r/records"+tc.query)
			if tc.code != 0 {
				if s := refusalOf(t, rec); rec.Code != tc.code || s.Message != tc.message {
					t.Fatalf("%d %+v; want %d %q", rec.Code, s, tc.code, tc.message)
				}
				return
			}
			var page transcriptclient.Page
			if err := json.Unmarshal(rec.Body.Bytes(), &page); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
			}
			var seqs []int64
			for _, r := range page.Records {
				seqs = append(seqs, r.Seq)
			}
			if !cmp.Equal(tc.seqs, seqs) || page.Last != tc.last {
				t.Errorf("records %v, last %d; want %v, last %d", seqs, page.Last, tc.seqs, tc.last)
			}
		})
	}
	t.Run("a transcript that cannot be read", func(t *testing.T) {
		a.h.Store = unreadable{a.store}
		rec := a.get(bearer("reader-token"), "/v1/namespaces/team-a/agentruns/r/records")
		if s := refusalOf(t, rec); rec.Code != http.StatusServiceUnavailable || s.Message != "reading the transcript: database is locked" {
			t.Fatalf("%d %+v; want 503, reading the transcript: database is locked", rec.Code, s)
		}
	})
}

// unreadable is a store whose records cannot be listed.
type unreadable struct{ transcript.Store }

func (unreadable) List(context.Context, transcript.Query) ([]transcript.Record, error) {
	return nil, errors.New("database is locked")
}

// The config a run pinned is read by whoever may get the run, as its revision holds it; a run
// that pinned none yet, or whose revision is gone, is a 404 that says so.
func TestARunsPinnedConfigIsReadWithTheRun(t *testing.T) {
	pending := runOf("pending", v1alpha1.PhasePending)
	old := runOf("old", v1alpha1.PhaseSucceeded)
	old.Status.ConfigRevision = "relay-0"
	a := newTranscriptAPI(t, people(), pending, old)
	for name, tc := range map[string]struct {
		as      caller
		run     string
		code    int
		message string
	}{
		"a reader, of a run that pinned its config": {as: bearer("reader-token"), run: "r", code: http.StatusOK},
		"a reader, of a run that pinned none yet": {as: bearer("reader-token"), run: "pending", code: http.StatusNotFound,
			message: "agentrun pending has pinned no config yet"},
		"a reader, of a run whose revision is gone": {as: bearer("reader-token"), run: "old", code: http.StatusNotFound,
			message: "the config revision relay-0 of agentrun old no longer exists"},
		"a stranger": {as: bearer("stranger-token"), run: "r", code: http.StatusForbidden,
			message: `agentruns.agents.baton.dev "r" is forbidden: User "stranger" cannot get resource "agentruns" in API group "agents.baton.dev" in the namespace "team-a"`},
	} {
		t.Run(name, func(t *testing.T) {
			rec := a.get(tc.as, "/v1/namespaces/team-a/agentruns/"+tc.run+"/config")
			if tc.code != http.StatusOK {
				if s := refusalOf(t, rec); rec.Code != tc.code || s.Message != tc.message {
					t.Fatalf("%d %+v; want %d %q", rec.Code, s, tc.code, tc.message)
				}
				return
			}
			var pinned records.PinnedConfig
			if err := json.Unmarshal(rec.Body.Bytes(), &pinned); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
			}
			if diff := cmp.Diff(records.PinnedConfig{Revision: "relay-1", Spec: relay().Spec}, pinned); diff != "" {
				t.Errorf("pinned config (-want +got):\n%s", diff)
			}
		})
	}
}

// A turn's transcript holds its session's history: reading it needs get on the session as well
// as on the run, and a stream ends when either is taken away.
func TestATurnsTranscriptIsForWhoeverMayGetItsSession(t *testing.T) {
	kube := people()
	kube.tokens["chatter-token"] = authenticationv1.UserInfo{Username: "chatter"}
	kube.rbac["chatter"] = []string{"get", "get agentsessions/chat"}
	turn := runOf("chat-t1", v1alpha1.PhaseSucceeded)
	turn.Spec.Session = &v1alpha1.SessionReference{Name: "chat"}
	a := newTranscriptAPI(t, kube, turn)
	a.record(t, turn, transcript.Key{Kind: transcript.KindHistory}, `{"turns":[],"input":"hello"}`)
	for name, tc := range map[string]struct {
		as      caller
		code    int
		message string
	}{
		"someone who may get the turn and its session": {as: bearer("chatter-token"), code: http.StatusOK},
		"someone who may get every run, not the session": {as: bearer("reader-token"), code: http.StatusForbidden,
			message: `agentsessions.agents.baton.dev "chat" is forbidden: User "reader" cannot get resource "agentsessions" in API group "agents.baton.dev" in the namespace "team-a"`},
	} {
		t.Run(name, func(t *testing.T) {
			rec := a.get(tc.as, "/v1/namespaces/team-a/agentruns/chat-t1/records")
			if rec.Code != tc.code {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.code)
			}
			if tc.code != http.StatusOK {
				if s := refusalOf(t, rec); s.Message != tc.message {
					t.Errorf("%q; want %q", s.Message, tc.message)
				}
			}
		})
	}
	// A run that is no turn asks nothing of sessions.
	if rec := a.get(bearer("reader-token"), "/v1/namespaces/team-a/agentruns/r/records"); rec.Code != http.StatusOK {
		t.Errorf("a run that is no turn: %d %s", rec.Code, rec.Body)
	}
}
