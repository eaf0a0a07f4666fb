package records

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/baton-dev/baton/internal/transcript"
)

// Record is a transcript record as readers get it from the transcript API.
type Record struct {
	Seq     int64           `json:"seq"`
	Kind    transcript.Kind `json:"kind"`
	Step    int32           `json:"step"`
	Attempt int32           `json:"attempt,omitempty"`
	Call    int32           `json:"call,omitempty"`
	Time    time.Time       `json:"time"`
	Body    json.RawMessage `json:"body"`
}

// FromStore is a stored record as readers get it.
func FromStore(r transcript.Record) Record {
	return Record{Seq: r.Seq, Kind: r.Kind, Step: r.Step, Attempt: r.Attempt, Call: r.Call, Time: r.Time, Body: r.Body}
}

// StepBody reads a step's record body.
func (r Record) StepBody() StepBody { return bodyAs[StepBody](r.Body) }

// DecisionBody reads the body of a record of people's decisions.
func (r Record) DecisionBody() DecisionBody { return bodyAs[DecisionBody](r.Body) }

// ProgressBody reads the body of a record of what a remote agent reported.
func (r Record) ProgressBody() ProgressBody { return bodyAs[ProgressBody](r.Body) }

// HistoryBody is the body of a turn's history record.
func (r Record) HistoryBody() HistoryBody { return bodyAs[HistoryBody](r.Body) }

// SummaryBody reads a summary record's body.
func (r Record) SummaryBody() SummaryBody { return bodyAs[SummaryBody](r.Body) }

// IsTool says whether the record is one of a tool call's, or of a step held at a gate inside
// it (a tool's, or a guardrail's).
func (r Record) IsTool() bool {
	return strings.HasPrefix(string(r.Kind), "tool") || r.Kind == transcript.KindGuardGate
}

// ToolBody reads a tool record's body.
func (r Record) ToolBody() Tool { return toolOf(r.Kind, r.Body) }
