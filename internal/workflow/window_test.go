package workflow_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-dev/baton/internal/workflow"
)

func TestWindowKeepsTheNewestEntriesWithinTheBudget(t *testing.T) {
	entry := func(step int32, text string) workflow.ContextEntry {
		return workflow.ContextEntry{Step: step, From: "a", Kind: workflow.ContextOutput, Text: text}
	}
	steps := func(es []workflow.ContextEntry) []int32 {
		out := []int32{}
		for _, e := range es {
			out = append(out, e.Step)
		}
		return out
	}
	five := []workflow.ContextEntry{entry(1, "aaaa"), entry(2, "bbbb"), entry(3, "cccc"), entry(4, "dddd"), entry(5, "eeee")}
	cases := map[string]struct {
		entries         []workflow.ContextEntry
		messages, chars int
		want            []int32
	}{
		"all fit":                          {five, 12, 1000, []int32{1, 2, 3, 4, 5}},
		"the newest messages":              {five, 2, 1000, []int32{4, 5}},
		"older entries drop out whole":     {five, 12, 10, []int32{4, 5}},
		"exactly the budget":               {five, 12, 12, []int32{3, 4, 5}},
		"no window":                        {five, 0, 1000, []int32{}},
		"the newest alone is cut to fit":   {[]workflow.ContextEntry{entry(1, "x"), entry(2, strings.Repeat("y", 50))}, 12, 10, []int32{2}},
		"characters, not bytes, are count": {[]workflow.ContextEntry{entry(1, "🙂🙂"), entry(2, "éé")}, 12, 4, []int32{1, 2}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := workflow.Window(append([]workflow.ContextEntry(nil), tc.entries...), tc.messages, tc.chars)
			if diff := cmp.Diff(tc.want, steps(got)); diff != "" {
				t.Fatalf("steps (-want +got):\n%s", diff)
			}
			total := 0
			for _, e := range got {
				total += len([]rune(e.Text))
			}
			if total > tc.chars {
				t.Fatalf("%d characters in a budget of %d", total, tc.chars)
			}
		})
	}
}
