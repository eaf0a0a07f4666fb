package records

import (
	"time"

	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/transcript"
)

const (
	// MaxProgressPerStep is the most progress records one step keeps: a remote agent that
	// reports more is not recorded past it.
	MaxProgressPerStep = 100
	// MaxProgressBytes bounds the text of one progress record.
	MaxProgressBytes = 4 << 10
)

// ProgressBody is what a remote agent reported while it worked on a step: the state its task
// was in, and what it said.
type ProgressBody struct {
	Agent string `json:"agent"`
	State string `json:"state"`
	Text  string `json:"text"`
	// Guard are the Output guardrails' verdicts on the text, before it was recorded.
	Guard []GuardVerdict `json:"guard,omitempty"`
}

// NewProgress is the n-th progress record (from 1) of a step, bounded, with the guardrails'
// verdicts on its text.
func NewProgress(run RunID, step, n int32, agent, state, text string, guard []GuardVerdict, at time.Time) transcript.Record {
	body := ProgressBody{Agent: agent, State: textbound.Bytes(state, 64), Text: textbound.Bytes(text, MaxProgressBytes), Guard: guard}
	return run.Record(transcript.Key{Kind: transcript.KindProgress, Step: step, Call: n}, at, transcript.Body(body))
}
