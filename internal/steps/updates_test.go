package steps

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/guardrails"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
)

// appended keeps what is appended to it; a report needs nothing else of a store.
type appended struct {
	transcript.Store
	recs []transcript.Record
}

func (a *appended) Append(_ context.Context, recs ...transcript.Record) ([]transcript.Record, error) {
	a.recs = append(a.recs, recs...)
	return recs, nil
}

// What a remote agent reports while it works is put before the config's Output guardrails, as
// its answer is, before the transcript keeps it: redacted as they redact it, withheld when they
// would block it or hold it for review.
func TestAReportIsScreenedBeforeTheTranscriptKeepsIt(t *testing.T) {
	verdict := func(action string) records.GuardVerdict {
		return records.GuardVerdict{Guardrail: "screen", Stage: v1alpha1.StageOutput, Action: action}
	}
	redacted, blocked, gated := verdict(guardrails.Redact), verdict(guardrails.Block), verdict(guardrails.Gate)
	const withheld = "(withheld by the config's Output guardrails; the step's answer is screened when it comes)"
	for name, tc := range map[string]struct {
		screened guardrails.Screened
		none     bool
		want     string
	}{
		"no guardrails: kept as reported": {none: true, want: "mail ada@example.com"},
		"redacted":                        {screened: guardrails.Screened{Text: "mail [email]", Verdicts: []records.GuardVerdict{redacted}}, want: "mail [email]"},
		"blocked: withheld":               {screened: guardrails.Screened{Text: "mail ada@example.com", Blocked: &blocked, Verdicts: []records.GuardVerdict{blocked}}, want: withheld},
		"held for review: withheld":       {screened: guardrails.Screened{Text: "mail ada@example.com", Gated: &gated, Verdicts: []records.GuardVerdict{gated}}, want: withheld},
	} {
		t.Run(name, func(t *testing.T) {
			store := &appended{}
			u := &updates{store: store, rid: records.RunID{UID: "u", Namespace: "ns", Name: "r"}, step: 1, agent: "remote"}
			if !tc.none {
				u.screen = func(_ context.Context, text string) guardrails.Screened {
					if text != "mail ada@example.com" {
						t.Errorf("the guardrails were asked about %q", text)
					}
					return tc.screened
				}
			}
			u.Report(context.Background(), "working", "mail ada@example.com")
			if len(store.recs) != 1 {
				t.Fatalf("%d records", len(store.recs))
			}
			var b records.ProgressBody
			if err := json.Unmarshal(store.recs[0].Body, &b); err != nil {
				t.Fatal(err)
			}
			if b.Text != tc.want || len(b.Guard) != len(tc.screened.Verdicts) {
				t.Fatalf("recorded %q with verdicts %+v; want %q with the guardrails' verdicts", b.Text, b.Guard, tc.want)
			}
		})
	}
}
