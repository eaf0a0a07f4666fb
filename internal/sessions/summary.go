package sessions

import (
	"fmt"
	"strings"

	"github.com/baton-dev/baton/internal/textbound"
)

// Turns that leave a session's window are summarized once, as they leave (compaction
// Summarize): the turn that first goes without them asks the session's summarizer for a new
// summary of the summary so far and those turns, before its first step, and every later turn is
// given that summary. The call is no step: it has no tools and no handoffs, and the loop
// detectors do not see it; its tokens and cost count as the turn's.

// Bounds of what is summarized and of a summary, in bytes.
const (
	// MaxFoldText bounds each question and answer kept to be summarized.
	MaxFoldText = 4 << 10
	// MaxSummary bounds a summary.
	MaxSummary = 8 << 10
)

// ToFold is left with each question and answer cut to MaxFoldText, for the turn's record.
func ToFold(left []Exchange) []Exchange {
	out := make([]Exchange, len(left))
	for i, e := range left {
		e.Input, e.Output = textbound.BytesMarked(e.Input, MaxFoldText), textbound.BytesMarked(e.Output, MaxFoldText)
		out[i] = e
	}
	return out
}

// SummaryTask is what the summarizer is asked: the summary so far and the turns to add to it,
// oldest first.
func SummaryTask(summary string, fold []Exchange) (task, input string) {
	task = "Keep the summary of a conversation between people and a team of agents. Later turns of the " +
		"conversation are given this summary instead of the turns it covers."
	var b strings.Builder
	if summary != "" {
		fmt.Fprintf(&b, "The summary so far:\n%s\n\n", summary)
	}
	b.WriteString("Turns to add to it, oldest first:")
	for _, e := range fold {
		from := e.From
		if from == "" {
			from = "the user"
		}
		fmt.Fprintf(&b, "\n\n[%s] %s asked:\n%s\n[%s] the team answered:\n%s", e.Turn, from, e.Input, e.Turn, e.Output)
	}
	fmt.Fprintf(&b, "\n\nAnswer with the new summary alone, in at most %d words: the facts, decisions, commitments and open questions that later turns need.", MaxSummary/40)
	return task, b.String()
}

// PlainSummary is the summary a Scripted summarizer keeps, with no model: the summary so far
// and each turn's question and answer on a line, cut to MaxSummary from the oldest.
func PlainSummary(summary string, fold []Exchange) string {
	lines := []string{}
	if summary != "" {
		lines = append(lines, summary)
	}
	for _, e := range fold {
		lines = append(lines, fmt.Sprintf("%s: asked %q; answered %q", e.Turn, textbound.Line(e.Input, 200), textbound.Line(e.Output, 200)))
	}
	return Summary(strings.Join(lines, "\n"))
}

// Summary is a summary as it is kept: at most MaxSummary bytes, the newest part kept.
func Summary(text string) string {
	text = strings.TrimSpace(text)
	if len(text) <= MaxSummary {
		return text
	}
	cut := len(text) - MaxSummary + 3
	for cut < len(text) && text[cut]&0xC0 == 0x80 {
		cut++
	}
	return "..." + text[cut:]
}
