package sessions

import (
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// A summary is kept within MaxSummary bytes, on a character boundary, its newest part kept;
// what is folded into it is cut to MaxFoldText per question and answer.
func TestSummariesStayWithinTheirBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringN(0, 3*MaxSummary, -1).Draw(t, "text")
		got := Summary(text)
		if len(got) > MaxSummary || !utf8.ValidString(got) && utf8.ValidString(text) {
			t.Fatalf("a summary of %d bytes kept %d", len(text), len(got))
		}
		if trimmed := strings.TrimSpace(text); len(trimmed) <= MaxSummary && got != trimmed {
			t.Fatalf("a summary within the bound was changed")
		}
		fold := ToFold([]Exchange{{Turn: "t1", Input: text, Output: text}})
		if len(fold[0].Input) > MaxFoldText || len(fold[0].Output) > MaxFoldText {
			t.Fatalf("a folded turn kept %d and %d bytes", len(fold[0].Input), len(fold[0].Output))
		}
	})
}

func TestPlainSummaryKeepsEachTurnOnALine(t *testing.T) {
	got := PlainSummary("t1: asked \"hi\"; answered \"hello\"", []Exchange{{Turn: "t2", Input: "where is\nORD-7?", Output: "in Berlin"}})
	want := "t1: asked \"hi\"; answered \"hello\"\nt2: asked \"where is ORD-7?\"; answered \"in Berlin\""
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTheSummarizerIsAskedForTheTurnsOnTopOfTheSummary(t *testing.T) {
	_, input := SummaryTask("they want a refund", []Exchange{{Turn: "t3", From: "alice", Input: "how much?", Output: "12 EUR"}})
	for _, want := range []string{"The summary so far:\nthey want a refund", "[t3] alice asked:\nhow much?", "[t3] the team answered:\n12 EUR"} {
		if !strings.Contains(input, want) {
			t.Errorf("the summarizer is asked:\n%s\nwant %q in it", input, want)
		}
	}
}
