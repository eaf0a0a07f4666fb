package console

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// A gate's page says how it reaches people: its reminders and escalation, from its spec.
func TestAGatesPageSaysItsRemindersAndEscalation(t *testing.T) {
	cfg := pipeline()
	cfg.Spec.Approvals[0].Remind = &v1alpha1.GateReminder{Every: "30m"}
	cfg.Spec.Approvals[0].Escalate = &v1alpha1.GateEscalation{After: "2h", To: v1alpha1.Deciders{Groups: []string{"oncall-leads"}}}
	s, _ := newConsole(t, true, cfg, waitingRun(time.Now()))
	_, body := get(t, s, "/runs/review/vendor-review")
	for _, want := range []string{"reminders every 30m0s: 0 so far", "escalates at", "to groups oncall-leads"} {
		if !strings.Contains(body, want) {
			t.Errorf("the gate's page lacks %q", want)
		}
	}
}

// A notification's link opens its page in this console once the token is traded; a link to
// anywhere else goes to the runs.
func TestTheTokensURLOpensTheLinkedPage(t *testing.T) {
	for page, want := range map[string]string{
		"/runs/shop/refund-1001#gate": "/runs/shop/refund-1001#gate",
		"//evil.example/runs/x":       "/runs",
		"https://evil.example/":       "/runs",
		"/sessions/shop/ticket-1":     "/sessions/shop/ticket-1",
	} {
		s, _ := newConsole(t, true)
		u, err := url.Parse(s.URLTo(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, page))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/?"+u.RawQuery, nil))
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
			t.Errorf("%s: %d to %q, want %q", page, rec.Code, rec.Header().Get("Location"), want)
		}
		// The next parameter is honoured only with the token.
		rec = httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/?token=wrong&next=/runs/a/b", nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("a wrong token with a page: %d", rec.Code)
		}
	}
	// A next the console did not make (a page elsewhere) is not followed either.
	s, _ := newConsole(t, true)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/?token="+s.token+"&next="+url.QueryEscape("/\\evil.example"), nil))
	if rec.Header().Get("Location") != "/runs" {
		t.Errorf("a next of /\\evil.example went to %q", rec.Header().Get("Location"))
	}
}
