package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/records"
)

func TestDecisionRecordsSayWhoDecidedWhat(t *testing.T) {
	at := time.Date(2026, 11, 22, 11, 34, 0, 0, time.UTC)
	record := func(body string) records.Record {
		return records.Record{Kind: "decision", Step: 2, Time: at, Body: json.RawMessage(body)}
	}
	for name, c := range map[string]struct {
		body, line, text string
	}{
		"an approval without feedback": {`{"decisions":[{"gate":"plan","decision":"Approved","by":"alice","time":"2026-11-22T11:34:00Z"}],"context":[]}`,
			"11:34:00  after step 2   Approved plan by alice",
			"=== after step 2: decision (2026-11-22T11:34:00Z)\nApproved plan by alice\n\n"},
		"a rejection back to an agent, with feedback": {`{"decisions":[{"gate":"final","decision":"Rejected","revise":"crm","by":"alice","time":"2026-11-22T11:34:00Z"}],` +
			`"context":[{"step":2,"from":"alice","kind":"Feedback","text":"check the disputes"}]}`,
			"11:34:00  after step 2   Rejected final by alice, back to crm; feedback from alice: check the disputes",
			"=== after step 2: decision (2026-11-22T11:34:00Z)\nRejected final by alice, back to crm\nfeedback from alice:\n  check the disputes\n\n"},
		"the input a run started from another keeps": {`{"context":[],"input":"whole input"}`, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := logLine(record(c.body)); got != c.line {
				t.Errorf("logs: %q, want %q", got, c.line)
			}
			var b bytes.Buffer
			printRecord(&b, record(c.body))
			if b.String() != c.text {
				t.Errorf("transcript: %q, want %q", b.String(), c.text)
			}
		})
	}
}

func TestProgressRecordsSayWhatARemoteAgentReported(t *testing.T) {
	at := time.Date(2026, 11, 22, 11, 34, 0, 0, time.UTC)
	r := records.Record{Kind: "progress", Step: 2, Time: at,
		Body: json.RawMessage(`{"agent":"stock","state":"TASK_STATE_WORKING","text":"counting SKU-123 in berlin"}`)}
	if got, want := logLine(r), "11:34:00  step 2   stock            reports: counting SKU-123 in berlin"; got != want {
		t.Errorf("logs: %q, want %q", got, want)
	}
	var b bytes.Buffer
	printRecord(&b, r)
	if want := "=== step 2: stock reports (TASK_STATE_WORKING) 2026-11-22T11:34:00Z\n  counting SKU-123 in berlin\n\n"; b.String() != want {
		t.Errorf("transcript: %q, want %q", b.String(), want)
	}
}

func TestAHistoryRecordSaysWhatATurnWasGivenAndAsked(t *testing.T) {
	at := time.Date(2026, 11, 28, 11, 34, 0, 0, time.UTC)
	r := records.Record{Kind: "history", Time: at, Body: json.RawMessage(
		`{"turns":[{"turn":"ticket-t1","from":"alice","input":"My VPN drops.","output":"Try the new profile."}],"from":"alice","input":"It still drops."}`)}
	if got, want := logLine(r), "11:34:00  turn     given 1 earlier turns; alice asks: It still drops."; got != want {
		t.Errorf("logs: %q, want %q", got, want)
	}
	var b bytes.Buffer
	printRecord(&b, r)
	want := "=== turn of a session, given 1 earlier turns (2026-11-28T11:34:00Z)\n" +
		"ticket-t1: alice asked:\n  My VPN drops.\nthe team answered:\n  Try the new profile.\n" +
		"alice asks:\n  It still drops.\n\n"
	if b.String() != want {
		t.Errorf("transcript: %q, want %q", b.String(), want)
	}
}
