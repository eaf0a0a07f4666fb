package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/baton-dev/baton/internal/runview"
)

// treeMark ends the line that holds a branch tree's place in the timeline's table, followed by
// the place of the step whose branches go there. No text a run holds reaches the table with it:
// a NUL byte is never part of a step's agent, outcome or reason as the table prints them.
const treeMark = "\x00branches:"

// withTrees writes the timeline's table with the tree of a step's branches in place of the
// line that holds its place: under the step, from the column of the step's agent.
func withTrees(out io.Writer, table string, branches map[int][]runview.Branch) {
	lines := strings.SplitAfter(table, "\n")
	indent := 0
	if len(lines) > 0 {
		indent = max(strings.Index(lines[0], "AGENT"), 0)
	}
	for _, line := range lines {
		_, at, found := strings.Cut(line, treeMark)
		if !found {
			fmt.Fprint(out, line)
			continue
		}
		i, err := strconv.Atoi(strings.TrimSpace(at))
		if err != nil {
			continue
		}
		describeBranches(out, strings.Repeat(" ", indent), branches[i])
	}
}

// describeBranches prints branches as a tree, a line each, indented: the branch's run (which
// kubectl baton describe tells in full), its agent, phase and reason, tokens and cost, and its
// own branches below it.
func describeBranches(out io.Writer, indent string, branches []runview.Branch) {
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	var add func(prefix string, bs []runview.Branch)
	add = func(prefix string, bs []runview.Branch) {
		for i, b := range bs {
			mark, under := "├─ ", "│  "
			if i == len(bs)-1 {
				mark, under = "└─ ", "   "
			}
			fmt.Fprintf(w, "%s%s%s%s\t%s\t%s\t%s\t%d tokens\t%s\n", indent, prefix, mark, b.Name, b.Agent, b.Phase, b.Reason,
				b.Tokens, cost(b))
			add(prefix+under, b.Branches)
		}
	}
	add("", branches)
	_ = w.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			fmt.Fprintln(out, strings.TrimRight(line, " \n"))
		}
	}
}

// cost is what a branch spent, in its currency; blank when it spent nothing on a priced model.
func cost(b runview.Branch) string {
	if b.Cost == "" {
		return ""
	}
	return strings.TrimSpace(b.Cost + " " + b.Currency)
}
