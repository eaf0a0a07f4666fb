package sessions

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/workflow"
)

// A turn's history is recorded in the turn's own transcript when it starts (records.History):
// the window of earlier turns it was given, verbatim, with the summary of those before, and its
// own input. The next turn's history is that record with the turn's exchange added and the
// oldest exchanges past the bounds taken out: two reads, whatever the session's length.

// Exchange is one earlier turn: what it was asked, by whom, and what the team answered.
type Exchange struct {
	Turn   string `json:"turn"`
	From   string `json:"from,omitempty"`
	Input  string `json:"input,omitempty"`
	Output string `json:"output,omitempty"`
}

// History is what a turn is given of the turns before it: the summary of those that left the
// window, and the latest verbatim, oldest first.
type History struct {
	Summary string     `json:"summary,omitempty"`
	Turns   []Exchange `json:"turns,omitempty"`
}

// Bounds bound a history's verbatim turns.
type Bounds struct {
	MaxTurns  int
	MaxTokens int64
	// Summarize says that turns leaving the window are folded into the summary; otherwise they
	// are dropped.
	Summarize bool
}

// Defaults of spec.history.
const (
	DefaultMaxTurns  = 20
	DefaultMaxTokens = 8000
)

// BoundsOf are the bounds a session's spec.history sets.
func BoundsOf(h *v1alpha1.SessionHistory) Bounds {
	b := Bounds{MaxTurns: DefaultMaxTurns, MaxTokens: DefaultMaxTokens, Summarize: true}
	if h == nil {
		return b
	}
	if h.MaxTurns != nil {
		b.MaxTurns = int(*h.MaxTurns)
	}
	if h.MaxTokens != nil {
		b.MaxTokens = *h.MaxTokens
	}
	b.Summarize = h.Compaction != v1alpha1.CompactionDrop
	return b
}

// Append is the history of the turn after last: h with last's exchange added, and the oldest
// exchanges taken out until the rest are within the bounds. left are those taken out, oldest
// first, for the summary when the bounds say Summarize.
func (h History) Append(last Exchange, b Bounds) (next History, left []Exchange) {
	turns := append(append(make([]Exchange, 0, len(h.Turns)+1), h.Turns...), last)
	tokens := int64(0)
	keep := len(turns)
	for keep > 0 {
		t := tokensOf(turns[keep-1])
		if len(turns)-keep+1 > b.MaxTurns || tokens+t > b.MaxTokens {
			break
		}
		tokens += t
		keep--
	}
	return History{Summary: h.Summary, Turns: turns[keep:]}, turns[:keep]
}

// tokensOf is an exchange's size in the window, estimated as budgets estimate prompts.
func tokensOf(e Exchange) int64 {
	return cost.EstimateTokens(int64(len(e.Input)+len(e.Output)), 2)
}

// Entries are the history as an agent sees it in its context, oldest first: the summary, then
// each turn's question and answer.
func (h History) Entries() []workflow.ContextEntry {
	var out []workflow.ContextEntry
	if h.Summary != "" {
		out = append(out, workflow.ContextEntry{From: "summary", Kind: workflow.ContextSummary, Text: h.Summary})
	}
	for _, t := range h.Turns {
		from := t.From
		if from == "" {
			from = "the user"
		}
		if t.Input != "" {
			out = append(out, workflow.ContextEntry{From: from, Kind: workflow.ContextAsked, Text: t.Input})
		}
		if t.Output != "" {
			out = append(out, workflow.ContextEntry{From: "team", Kind: workflow.ContextAnswered, Text: t.Output})
		}
	}
	return out
}

// Digest is a short digest of what the history gives a turn's agents: its summary and each
// turn's asker, question and answer, not the turns' names. Turns given the same history are
// compared by the loop detectors that see across turns.
func (h History) Digest() string {
	type said struct{ From, Input, Output string }
	seen := struct {
		Summary string
		Turns   []said
	}{Summary: h.Summary}
	for _, t := range h.Turns {
		seen.Turns = append(seen.Turns, said{t.From, t.Input, t.Output})
	}
	b, _ := json.Marshal(seen) //nolint:errchkjson // strings only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
