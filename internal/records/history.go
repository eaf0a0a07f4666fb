package records

import (
	"encoding/json"
	"time"

	"github.com/baton-dev/baton/internal/sessions"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// HistoryBody is a turn's history record: what it was given of its session's earlier turns,
// and what it was asked, by whom.
type HistoryBody struct {
	sessions.History
	From  string `json:"from,omitempty"`
	Input string `json:"input,omitempty"`
	// Fold are the turns that left the window as this turn started, to be summarized before
	// its first step by the agent Summarizer ("" for the entrypoint).
	Fold       []sessions.Exchange `json:"fold,omitempty"`
	Summarizer string              `json:"summarizer,omitempty"`
}

// SummaryBody is a turn's summary record: the new summary of the session's turns that left the
// window, which the turn and those after it are given, and what making it used.
type SummaryBody struct {
	Summary string `json:"summary"`
	// Turns name the turns it added to the summary before.
	Turns []string `json:"turns,omitempty"`
	Agent string   `json:"agent"`
	// Tokens, InputTokens and Cost (in Currency) are what the summarizer's call used.
	Tokens      int64  `json:"tokens,omitempty"`
	InputTokens int64  `json:"inputTokens,omitempty"`
	Cost        string `json:"cost,omitempty"`
	Currency    string `json:"currency,omitempty"`
}

// SummaryKey is the key of a turn's summary record.
var SummaryKey = transcript.Key{Kind: transcript.KindSummary}

// Record is the summary as its turn's record.
func (b SummaryBody) Record(run RunID, now time.Time) transcript.Record {
	return run.Record(SummaryKey, now, transcript.Body(b))
}

// SummaryOf reads a summary record.
func SummaryOf(rec transcript.Record) (SummaryBody, error) {
	var b SummaryBody
	err := json.Unmarshal(rec.Body, &b)
	return b, err
}

// WithSummary is a turn's context with this summary in place of the one its history record
// gave: a summary made as the turn started replaces the one before.
func WithSummary(entries []workflow.ContextEntry, summary string) []workflow.ContextEntry {
	out := make([]workflow.ContextEntry, 0, len(entries)+1)
	out = append(out, workflow.ContextEntry{From: "summary", Kind: workflow.ContextSummary, Text: summary})
	for _, e := range entries {
		if e.Kind != workflow.ContextSummary {
			out = append(out, e)
		}
	}
	return out
}

// HistoryKey is the key of a turn's history record: one per turn.
var HistoryKey = transcript.Key{Kind: transcript.KindHistory}

// Record is the history as its turn's record.
func (b HistoryBody) Record(run RunID, now time.Time) transcript.Record {
	return run.Record(HistoryKey, now, transcript.Body(b))
}

// HistoryOf reads a history record.
func HistoryOf(rec transcript.Record) (HistoryBody, error) {
	var b HistoryBody
	err := json.Unmarshal(rec.Body, &b)
	return b, err
}
