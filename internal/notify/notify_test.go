package notify

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/baton-dev/baton/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func openedEvent() Event {
	deadline := t0.Add(2 * time.Hour)
	return Event{ID: "ev-1", Type: v1alpha1.NotifyGateOpened, Time: t0, Namespace: "team-a", Run: "refund-7", RunUID: "u1",
		Config: "refunds", Gate: "plan", Waiting: WaitingOutput("Refund 12 EUR to <!channel> & order 1001"),
		Deciders: &v1alpha1.Deciders{Groups: []string{"refund-approvers"}}, Deadline: &deadline,
		URL: "https://console.example/runs/team-a/refund-7#gate"}
}

// A CloudEvent is 1.0 structured JSON that the SDK reads back: its type, id, source and data
// as the contract lists them.
func TestACloudEventIsOneThatTheSDKReads(t *testing.T) {
	body, ctype, err := Body(openedEvent(), v1alpha1.NotifyCloudEvents)
	if err != nil || ctype != ContentCloudEvents {
		t.Fatalf("%q %v", ctype, err)
	}
	var ce event.Event
	if err := json.Unmarshal(body, &ce); err != nil {
		t.Fatalf("the SDK cannot read %s: %v", body, err)
	}
	if ce.SpecVersion() != "1.0" || ce.Type() != "dev.baton.GateOpened" || ce.ID() != "ev-1" ||
		ce.Source() != "/namespaces/team-a/agentconfigs/refunds" || ce.Subject() != "agentruns/refund-7" {
		t.Errorf("envelope %s", ce.String())
	}
	var d map[string]any
	if err := ce.DataAs(&d); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"namespace", "run", "config", "gate", "waiting", "deciders", "deadline", "url"} {
		if _, ok := d[k]; !ok {
			t.Errorf("data lacks %s: %v", k, d)
		}
	}
	if w := d["waiting"].(map[string]any); w["sha256"] == "" || w["output"] != "Refund 12 EUR to <!channel> & order 1001" {
		t.Errorf("waiting %v", w)
	}
}

// A Slack message quotes what waits as plain text, so a mention or a link in it is nothing
// more; the headline's markup is escaped.
func TestASlackMessageQuotesWhatWaitsAsPlainText(t *testing.T) {
	e := openedEvent()
	e.Run = "r<@U123>"
	body, _, err := Body(e, v1alpha1.NotifySlack)
	if err != nil {
		t.Fatal(err)
	}
	var m slack
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if got := m.Blocks[0].Text; got.Type != "mrkdwn" || strings.Contains(got.Text, "<@U123>") {
		t.Errorf("headline %+v: a name with markup must be escaped", got)
	}
	if got := m.Blocks[1].Text; got.Type != "plain_text" || got.Text != "Refund 12 EUR to <!channel> & order 1001" {
		t.Errorf("excerpt %+v", got)
	}
	long := strings.Repeat("é", 5000)
	e.Waiting = WaitingOutput(long)
	body, _, _ = Body(e, v1alpha1.NotifySlack)
	_ = json.Unmarshal(body, &m)
	if n := len([]rune(m.Blocks[1].Text.Text)); n != maxExcerpt {
		t.Errorf("an excerpt of %d characters, want %d", n, maxExcerpt)
	}
}

// What waits is whole up to 64 KiB; its SHA-256 is always of the whole.
func TestWhatWaitsIsBoundedAndItsDigestIsOfTheWhole(t *testing.T) {
	whole := strings.Repeat("x", MaxWaiting+10)
	w := WaitingOutput(whole)
	if len(w.Output) != MaxWaiting || !w.Truncated || w.SHA256 != digest(whole) {
		t.Errorf("%d bytes kept, truncated %v", len(w.Output), w.Truncated)
	}
	if w := WaitingCall(`crm/refund {"order":1001}`); w.Truncated || w.ToolCall == "" {
		t.Errorf("%+v", w)
	}
}

func TestSignaturesVerify(t *testing.T) {
	key, body := []byte("s3cret"), []byte(`{"id":"ev-1"}`)
	h := Sign(key, body, t0)
	if !strings.HasPrefix(h, "t=1795867200,v1=") {
		t.Fatalf("header %q", h)
	}
	if err := Verify(key, body, h, t0.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("a good signature: %v", err)
	}
	for name, tc := range map[string]struct {
		key, body []byte
		now       time.Time
	}{
		"another body": {key, []byte(`{"id":"ev-2"}`), t0},
		"another key":  {[]byte("other"), body, t0},
		"too old":      {key, body, t0.Add(time.Hour)},
	} {
		if err := Verify(tc.key, tc.body, h, tc.now, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestWhatIsTriedAgain(t *testing.T) {
	for status, want := range map[int]Outcome{200: Sent, 204: Sent, 0: Retry, 408: Retry, 429: Retry, 500: Retry, 503: Retry,
		400: GiveUp, 401: GiveUp, 404: GiveUp, 410: GiveUp} {
		if got := OutcomeOf(status); got != want {
			t.Errorf("%d: %v, want %v", status, got, want)
		}
	}
	// Backoff doubles from a second up to ten minutes; Retry-After is honoured; past a day, it
	// gives up.
	prev := time.Duration(0)
	for attempts := 1; attempts < 20; attempts++ {
		next, ok := NextTry(t0, t0, attempts, "")
		wait := next.Sub(t0)
		if !ok || wait < prev || wait > MaxRetry {
			t.Fatalf("attempt %d waits %s after %s", attempts, wait, prev)
		}
		prev = wait
	}
	if next, _ := NextTry(t0, t0, 1, "120"); next.Sub(t0) != 2*time.Minute {
		t.Errorf("Retry-After 120 waits %s", next.Sub(t0))
	}
	if next, _ := NextTry(t0, t0, 1, t0.Add(time.Hour).Format(http.TimeFormat)); next.Sub(t0) != time.Hour {
		t.Errorf("a Retry-After date an hour away waits %s", next.Sub(t0))
	}
	if _, ok := NextTry(t0, t0.Add(GiveUpAfter-time.Second), 30, ""); ok {
		t.Error("an event tried for a day is tried again")
	}
}
