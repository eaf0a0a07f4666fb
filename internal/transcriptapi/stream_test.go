package transcriptapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
)

// events reads a stream of Server-Sent Events as "id event data" lines, the id left out where
// an event has none.
func events(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	for e := range eventsOf(body) {
		out = append(out, e)
	}
	return out
}

// eventsOf sends each event of the stream as it comes, until the stream ends.
func eventsOf(body io.Reader) <-chan string {
	out := make(chan string, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var fields []string
		for sc.Scan() {
			line := sc.Text()
			if line == "" && fields != nil {
				out <- strings.Join(fields, " ")
				fields = nil
				continue
			}
			for _, prefix := range []string{"id: ", "event: ", "data: "} {
				if v, ok := strings.CutPrefix(line, prefix); ok {
					fields = append(fields, v)
				}
			}
		}
	}()
	return out
}

// A stream sends a run's records as events, each with its sequence number as its ID, from
// after Last-Event-ID (or ?after=) on, and ends with the run's end once every record is sent.
func TestAStreamSendsARunsRecordsAndEndsWithTheRun(t *testing.T) {
	a := newTranscriptAPI(t, people())
	record := []string{
		`1 record {"seq":1,"kind":"step","step":1,"time":"2026-11-28T15:00:00Z","body":{"agent":"a","output":"to b"}}`,
		`2 record {"seq":2,"kind":"decision","step":1,"call":1,"time":"2026-11-28T15:00:00Z","body":{"gate":"check","decision":"Approved","by":"alice"}}`,
		`3 record {"seq":3,"kind":"step","step":2,"time":"2026-11-28T15:00:00Z","body":{"agent":"b","output":"done"}}`,
	}
	end := `end {"phase":"Succeeded","reason":"Completed"}`
	for name, tc := range map[string]struct {
		header []string
		query  string
		want   []string
	}{
		"from the start":            {want: append(record[:3:3], end)},
		"resumed after the first":   {header: []string{"Last-Event-ID", "1"}, want: append(record[1:3:3], end)},
		"from after the second":     {query: "?after=2", want: []string{record[2], end}},
		"resumed after every event": {header: []string{"Last-Event-ID", "3"}, want: []string{end}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := a.get(bearer("reader-token"), "/v1/namespaces/team-a/agentruns/r/stream"+tc.query, tc.header...)
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%d %s %s; want 200, text/event-stream", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
			if diff := cmp.Diff(tc.want, events(t, rec.Body)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("resumed after an ID that is no sequence number", func(t *testing.T) {
		rec := a.get(bearer("reader-token"), "/v1/namespaces/team-a/agentruns/r/stream", "Last-Event-ID", "abc")
		if s := refusalOf(t, rec); rec.Code != http.StatusBadRequest || s.Message != `Last-Event-ID: "abc" is not a record's sequence number` {
			t.Fatalf("%d %+v; want 400 naming Last-Event-ID", rec.Code, s)
		}
	})
}

// follow opens a stream of the run over TLS as the caller, with the client certificates given,
// and returns its events as they come.
func follow(t *testing.T, a *transcriptAPI, run string, as caller, certs ...tls.Certificate) <-chan string {
	t.Helper()
	srv := httptest.NewUnstartedServer(a.h.ServeMux())
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.Transport.(*http.Transport).TLSClientConfig.Certificates = certs
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/namespaces/team-a/agentruns/"+run+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	as(req)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream answered %d", resp.StatusCode)
	}
	return eventsOf(resp.Body)
}

// next is the stream's next event; it fails the test when the stream ends first or sends
// nothing for long.
func next(t *testing.T, stream <-chan string) string {
	t.Helper()
	select {
	case e, ok := <-stream:
		if !ok {
			t.Fatal("the stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the stream sent nothing for 10s")
		return ""
	}
}

// ended reports whether the stream ends after what it sent.
func ended(t *testing.T, stream <-chan string) bool {
	t.Helper()
	select {
	case e, ok := <-stream:
		if ok {
			t.Errorf("the stream sent %q after its last event", e)
		}
		return !ok
	case <-time.After(10 * time.Second):
		return false
	}
}

// A stream of a run at work sends each record as it is written, and ends when the run ends,
// or is deleted, once every record is sent.
func TestAStreamFollowsARunUntilItEnds(t *testing.T) {
	for name, tc := range map[string]struct {
		end  func(context.Context, *transcriptAPI, *v1alpha1.AgentRun) error
		want string
	}{
		"the run ends": {want: `end {"phase":"Failed","reason":"Cancelled"}`, end: func(ctx context.Context, a *transcriptAPI, run *v1alpha1.AgentRun) error {
			run.Status.Phase, run.Status.TerminationReason = v1alpha1.PhaseFailed, v1alpha1.ReasonCancelled
			return a.runs.Update(ctx, run)
		}},
		"the run is deleted": {want: `end {"phase":"Running","reason":""}`, end: func(ctx context.Context, a *transcriptAPI, run *v1alpha1.AgentRun) error {
			return a.runs.Delete(ctx, run)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			live := runOf("live", v1alpha1.PhaseRunning)
			a := newTranscriptAPI(t, people(), live)
			a.record(t, live, transcript.Key{Kind: transcript.KindStep, Step: 1}, `{"output":"first"}`)
			stream := follow(t, a, "live", bearer("reader-token"))
			if e := next(t, stream); !strings.HasPrefix(e, "4 record ") || !strings.Contains(e, `"output":"first"`) {
				t.Fatalf("first event %q; want the first record", e)
			}
			a.record(t, live, transcript.Key{Kind: transcript.KindStep, Step: 2}, `{"output":"second"}`)
			if e := next(t, stream); !strings.HasPrefix(e, "5 record ") || !strings.Contains(e, `"output":"second"`) {
				t.Fatalf("second event %q; want the record written since", e)
			}
			if err := tc.end(t.Context(), a, live); err != nil {
				t.Fatal(err)
			}
			if e := next(t, stream); e != tc.want {
				t.Fatalf("last event %q; want %q", e, tc.want)
			}
			if !ended(t, stream) {
				t.Fatal("the stream did not end with the run")
			}
		})
	}
}

// A stream checks again, while it lasts, that its caller may still read the run: a run can
// wait for days, and a reader whose access was taken away meanwhile reads no more of it.
func TestAStreamEndsOnceItsCallerMayNoLongerReadTheRun(t *testing.T) {
	kube := people()
	kube.ca = newCA(t, "kubernetes")
	waiting := runOf("waiting", v1alpha1.PhaseAwaitingApproval)
	a := newTranscriptAPI(t, kube, waiting)
	trustClientCA(t, kube, a)
	a.record(t, waiting, transcript.Key{Kind: transcript.KindStep, Step: 1}, `{"output":"a plan"}`)
	// The operator's authorizer keeps an answer for seconds; this one asks every time, so that
	// the stream sees the change at its next check.
	a.h.Auth.authz = kube.uncached(t)
	a.h.Reauthorize = time.Millisecond
	stream := follow(t, a, "waiting", anonymous, kube.ca.issue(t, "carl", "readers"))
	if e := next(t, stream); !strings.HasPrefix(e, "4 record ") {
		t.Fatalf("first event %q; want the run's record", e)
	}
	kube.revoke("group:readers")
	want := `error {"message":"access ended (403): agentruns.agents.baton.dev \"waiting\" is forbidden: User \"carl\" cannot get resource \"agentruns\" in API group \"agents.baton.dev\" in the namespace \"team-a\""}`
	if e := next(t, stream); e != want {
		t.Fatalf("event %q; want %q", e, want)
	}
	if !ended(t, stream) {
		t.Fatal("the stream went on after its caller lost access")
	}
}

// The same with a bearer token, as exec plugins (EKS, GKE) give kubectl: each re-check
// authenticates the stream's request again, so checking it once must leave its token on it.
func TestAStreamOnATokenEndsOnlyOnceItsCallerMayNoLongerReadTheRun(t *testing.T) {
	kube := people()
	waiting := runOf("waiting", v1alpha1.PhaseAwaitingApproval)
	a := newTranscriptAPI(t, kube, waiting)
	a.record(t, waiting, transcript.Key{Kind: transcript.KindStep, Step: 1}, `{"output":"a plan"}`)
	a.h.Auth.authz = kube.uncached(t)
	a.h.Reauthorize = time.Millisecond
	stream := follow(t, a, "waiting", bearer("reader-token"))
	if e := next(t, stream); !strings.HasPrefix(e, "4 record ") {
		t.Fatalf("first event %q; want the run's record", e)
	}
	a.record(t, waiting, transcript.Key{Kind: transcript.KindStep, Step: 2}, `{"output":"more"}`)
	if e := next(t, stream); !strings.HasPrefix(e, "5 record ") {
		t.Fatalf("after re-checks, event %q; want the run's next record", e)
	}
	kube.revoke("reader")
	want := `error {"message":"access ended (403): agentruns.agents.baton.dev \"waiting\" is forbidden: User \"reader\" cannot get resource \"agentruns\" in API group \"agents.baton.dev\" in the namespace \"team-a\""}`
	if e := next(t, stream); e != want {
		t.Fatalf("event %q; want %q", e, want)
	}
}
