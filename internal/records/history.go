package records

import (
	"encoding/json"
	"time"

	"github.com/baton-dev/baton/internal/sessions"
	"github.com/baton-dev/baton/internal/transcript"
)

// HistoryBody is a turn's history record: what it was given of its session's earlier turns,
// and what it was asked, by whom.
type HistoryBody struct {
	sessions.History
	From  string `json:"from,omitempty"`
	Input string `json:"input,omitempty"`
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
