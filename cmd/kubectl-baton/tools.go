package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/textbound"
)

// printToolRecord prints a tool record in full, for people.
func printToolRecord(w io.Writer, r records.Record) {
	b := r.ToolBody()
	at := r.Time.Format(time.RFC3339)
	switch r.Kind {
	case "tool-turn":
		fmt.Fprintf(w, "=== step %d: %s asks for %d tool call(s) %s, %d tokens\n", r.Step, b.Agent, len(b.Calls), at, b.Tokens)
		if b.Text != "" {
			fmt.Fprintf(w, "%s\n", indent(b.Text))
		}
		for _, c := range b.Calls {
			fmt.Fprintf(w, "  %s\n", records.CallString(c))
		}
	case "tool":
		fmt.Fprintf(w, "=== step %d: tool call %s %s, %s%s\n", r.Step, records.CallString(b.ToolCall), at, time.Duration(b.LatencyMs)*time.Millisecond, toolNote(b))
		if b.Held != "" {
			fmt.Fprintf(w, "--- result (held for review at gate %s before the model saw it)\n%s\n", b.Held, indent(b.Content))
		} else {
			fmt.Fprintf(w, "--- result\n%s\n", indent(b.Content))
		}
	case "tool-start":
		fmt.Fprintf(w, "=== step %d: sending call #%d of %s/%s (side effects; idempotency key %s) %s\n", r.Step, r.Call, b.Server, b.Tool, b.IdempotencyKey, at)
	case "tool-gate":
		fmt.Fprintf(w, "=== step %d: call %s waits at gate %s %s\n", r.Step, records.CallString(b.ToolCall), b.Gate, at)
	case "guard-gate":
		if g := b.Guard; g != nil {
			fmt.Fprintf(w, "=== step %d: %s waits at gate %s for review %s%s\n", r.Step, runview.GuardedText(*g), b.Gate, at, prefixed(": ", g.Reason))
			fmt.Fprintf(w, "--- held\n%s\n", indent(g.Text))
		}
	default:
		fmt.Fprintf(w, "=== step %d: %s %s\n", r.Step, r.Kind, at)
	}
	fmt.Fprintln(w)
}

// toolNote says how a call went, when it did not simply succeed.
func toolNote(b records.Tool) string {
	if note := b.Note(); note != "" {
		return " (" + note + ")"
	}
	return ""
}

// toolLine is one line of a tool record.
func toolLine(r records.Record) string {
	b := r.ToolBody()
	var what string
	switch r.Kind {
	case "tool-turn":
		calls := make([]string, len(b.Calls))
		for i, c := range b.Calls {
			calls[i] = c.Server + "/" + c.Tool
		}
		what = fmt.Sprintf("%s asks for %s", b.Agent, strings.Join(calls, ", "))
	case "tool":
		what = fmt.Sprintf("#%d %s/%s -> %s%s", b.Index, b.Server, b.Tool, textbound.Line(b.Content, 80), toolNote(b))
	case "tool-start":
		what = fmt.Sprintf("#%d %s/%s sending", r.Call, b.Server, b.Tool)
	case "tool-gate":
		what = "waits at gate " + b.Gate
	case "guard-gate":
		what = "held for review at gate " + b.Gate
	default:
		what = string(r.Kind)
	}
	return fmt.Sprintf("%s  step %-3d %s", r.Time.Format("15:04:05"), r.Step, what)
}
