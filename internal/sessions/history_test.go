package sessions

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/baton-dev/baton/internal/workflow"
)

func exchange(n int, size int) Exchange {
	return Exchange{Turn: fmt.Sprintf("t%d", n), From: "alice", Input: fmt.Sprintf("question %d", n), Output: strings.Repeat("a", size)}
}

func TestAHistoryKeepsTheLatestTurnsWithinItsBounds(t *testing.T) {
	full := History{Summary: "before", Turns: []Exchange{exchange(1, 10), exchange(2, 10), exchange(3, 10)}}
	for name, tc := range map[string]struct {
		h    History
		last Exchange
		b    Bounds
		kept []string
		left []string
	}{
		"the first turn's history is the first exchange": {
			last: exchange(1, 10), b: Bounds{MaxTurns: 20, MaxTokens: 8000}, kept: []string{"t1"},
		},
		"past maxTurns, the oldest leave first": {
			h: full, last: exchange(4, 10), b: Bounds{MaxTurns: 2, MaxTokens: 8000}, kept: []string{"t3", "t4"}, left: []string{"t1", "t2"},
		},
		"past maxTokens, the oldest leave first": {
			h: full, last: exchange(4, 100), b: Bounds{MaxTurns: 20, MaxTokens: 70}, kept: []string{"t4"}, left: []string{"t1", "t2", "t3"},
		},
		"an exchange larger than the window leaves at once": {
			h: full, last: exchange(4, 1000), b: Bounds{MaxTurns: 20, MaxTokens: 100}, left: []string{"t1", "t2", "t3", "t4"},
		},
		"maxTurns 0 keeps no turn": {
			h: full, last: exchange(4, 1), b: Bounds{MaxTurns: 0, MaxTokens: 8000}, left: []string{"t1", "t2", "t3", "t4"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			next, left := tc.h.Append(tc.last, tc.b)
			if got := names(next.Turns); strings.Join(got, ",") != strings.Join(tc.kept, ",") {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			if got := names(left); strings.Join(got, ",") != strings.Join(tc.left, ",") {
				t.Errorf("left %v, want %v", got, tc.left)
			}
			if next.Summary != tc.h.Summary {
				t.Errorf("summary %q, want %q kept", next.Summary, tc.h.Summary)
			}
		})
	}
}

func names(es []Exchange) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Turn)
	}
	return out
}

// Whatever the turns, a history holds at most maxTurns turns and maxTokens, the latest, in
// order; none is lost: those it no longer holds are left, oldest first.
func TestAHistoryIsBoundedAndLosesNoTurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := Bounds{MaxTurns: rapid.IntRange(0, 8).Draw(t, "maxTurns"), MaxTokens: rapid.Int64Range(0, 400).Draw(t, "maxTokens")}
		var h History
		var all, gone []string
		for i := range rapid.IntRange(1, 30).Draw(t, "turns") {
			e := exchange(i, rapid.IntRange(0, 300).Draw(t, "size"))
			all = append(all, e.Turn)
			var left []Exchange
			h, left = h.Append(e, b)
			gone = append(gone, names(left)...)
			tokens := int64(0)
			for _, k := range h.Turns {
				tokens += tokensOf(k)
			}
			if len(h.Turns) > b.MaxTurns || tokens > b.MaxTokens {
				t.Fatalf("%d turns, %d tokens past %+v", len(h.Turns), tokens, b)
			}
			if got := append(append([]string{}, gone...), names(h.Turns)...); strings.Join(got, ",") != strings.Join(all, ",") {
				t.Fatalf("left then kept %v, want every turn once in order %v", got, all)
			}
		}
	})
}

func TestAHistoryIsGivenAsQuestionsAndAnswers(t *testing.T) {
	h := History{Summary: "they asked about invoices", Turns: []Exchange{{Turn: "t1", From: "alice", Input: "and March?", Output: "paid"}, {Turn: "t2", Input: "thanks"}}}
	got := h.Entries()
	want := []workflow.ContextEntry{
		{From: "summary", Kind: workflow.ContextSummary, Text: "they asked about invoices"},
		{From: "alice", Kind: workflow.ContextAsked, Text: "and March?"},
		{From: "team", Kind: workflow.ContextAnswered, Text: "paid"},
		{From: "the user", Kind: workflow.ContextAsked, Text: "thanks"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries %+v\nwant %+v", got, want)
	}
}

// BenchmarkHistory is the history a turn is given after n earlier turns, each a 2 KB question
// and answer, under the default bounds: its time and its record's bytes stay flat once the
// window is full, however long the session.
func BenchmarkHistory(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("after %d turns", n), func(b *testing.B) {
			bounds := BoundsOf(nil)
			var h History
			for i := range n - 1 {
				h, _ = h.Append(exchange(i, 2000), bounds)
			}
			var size int
			b.ResetTimer()
			for range b.N {
				next, _ := h.Append(exchange(n, 2000), bounds)
				body, err := json.Marshal(next)
				if err != nil {
					b.Fatal(err)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "record-bytes")
		})
	}
}
