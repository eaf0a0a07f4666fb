package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/baton-dev/baton/transcriptapi"
)

// toolBody is what the plugin reads of a tool record's body: a turn that asked for calls, a
// call's outcome, the mark of a call being sent, or a step held at a tool's gate.
type toolBody struct {
	Agent  string     `json:"agent"`
	Text   string     `json:"text"`
	Tokens int64      `json:"tokens"`
	Calls  []toolCall `json:"calls"`
	toolCall
	Content        string    `json:"content"`
	IsError        bool      `json:"isError"`
	Refused        string    `json:"refused"`
	ApprovedBy     []string  `json:"approvedBy"`
	IdempotencyKey string    `json:"idempotencyKey"`
	LatencyMs      int64     `json:"latencyMs"`
	Gate           string    `json:"gate"`
	Call           *toolCall `json:"call"`
}

type toolCall struct {
	Index     int32           `json:"index"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

func (c toolCall) String() string {
	return fmt.Sprintf("#%d %s/%s %s", c.Index, c.Server, c.Tool, strings.TrimSpace(string(c.Arguments)))
}

func isTool(r transcriptapi.Record) bool { return strings.HasPrefix(string(r.Kind), "tool") }

func toolBodyOf(r transcriptapi.Record) toolBody {
	var b toolBody
	_ = json.Unmarshal(r.Body, &b)
	return b
}

// printToolRecord prints a tool record in full, for people.
func printToolRecord(w io.Writer, r transcriptapi.Record) {
	b := toolBodyOf(r)
	at := r.Time.Format(time.RFC3339)
	switch r.Kind {
	case "tool-turn":
		fmt.Fprintf(w, "=== step %d: %s asks for %d tool call(s) %s, %d tokens\n", r.Step, b.Agent, len(b.Calls), at, b.Tokens)
		if b.Text != "" {
			fmt.Fprintf(w, "%s\n", indent(b.Text))
		}
		for _, c := range b.Calls {
			fmt.Fprintf(w, "  %s\n", c)
		}
	case "tool":
		fmt.Fprintf(w, "=== step %d: tool call %s %s, %s%s\n", r.Step, b.toolCall, at, time.Duration(b.LatencyMs)*time.Millisecond, toolNote(b))
		fmt.Fprintf(w, "--- result\n%s\n", indent(b.Content))
	case "tool-start":
		fmt.Fprintf(w, "=== step %d: sending call #%d of %s/%s (side effects; idempotency key %s) %s\n", r.Step, r.Call, b.Server, b.Tool, b.IdempotencyKey, at)
	case "tool-gate":
		call := ""
		if b.Call != nil {
			call = b.Call.String()
		}
		fmt.Fprintf(w, "=== step %d: call %s waits at gate %s %s\n", r.Step, call, b.Gate, at)
	default:
		fmt.Fprintf(w, "=== step %d: %s %s\n", r.Step, r.Kind, at)
	}
	fmt.Fprintln(w)
}

// toolNote says how a call went, when it did not simply succeed.
func toolNote(b toolBody) string {
	switch {
	case b.Refused != "":
		return " (not made: " + b.Refused + ")"
	case b.IsError:
		return " (error)"
	case len(b.ApprovedBy) > 0:
		return " (approved by " + strings.Join(b.ApprovedBy, ", ") + ")"
	}
	return ""
}

// toolLine is one line of a tool record.
func toolLine(r transcriptapi.Record) string {
	b := toolBodyOf(r)
	var what string
	switch r.Kind {
	case "tool-turn":
		calls := make([]string, len(b.Calls))
		for i, c := range b.Calls {
			calls[i] = c.Server + "/" + c.Tool
		}
		what = fmt.Sprintf("%s asks for %s", b.Agent, strings.Join(calls, ", "))
	case "tool":
		what = fmt.Sprintf("#%d %s/%s -> %s%s", b.Index, b.Server, b.Tool, oneLine(b.Content, 80), toolNote(b))
	case "tool-start":
		what = fmt.Sprintf("#%d %s/%s sending", r.Call, b.Server, b.Tool)
	case "tool-gate":
		what = "waits at gate " + b.Gate
	default:
		what = string(r.Kind)
	}
	return fmt.Sprintf("%s  step %-3d %s", r.Time.Format("15:04:05"), r.Step, what)
}
