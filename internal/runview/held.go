package runview

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
)

// HeldCall is the tool call a run's gate holds, as the people who judge it are to see it.
// Status keeps only the beginning of a call's arguments (4 KiB of up to 64 KiB); the call's
// record in the transcript has them whole, and they are what an approval lets through.
type HeldCall struct {
	Server, Tool string
	Step, Call   int32
	// Arguments are the call's arguments, as JSON, indented.
	Arguments string
	// Whole says Arguments are the call's own, from the transcript. When they are status's
	// copy instead, Note says why, and whether the copy is cut.
	Whole bool
	Note  string
	// Taint is where untrusted content in the context the call was asked in came from, for a
	// call held at its taint gate.
	Taint string
}

// Holds reports whether r is the record of the call p holds at its gate.
func Holds(p *v1alpha1.PendingToolCall, r records.Record) bool {
	if p == nil || r.Kind != transcript.KindToolGate || r.Step != p.Step || r.Call != p.Call {
		return false
	}
	c := r.ToolBody().ToolCall
	return c.Server == p.Server && c.Tool == p.Tool && len(c.Arguments) > 0
}

// Held is the call p holds: whole from rec, its record (see Holds), or, when rec is nil,
// status's copy with a note. unread says why the transcript was not read, when it was not.
func Held(p *v1alpha1.PendingToolCall, rec *records.Record, unread string) HeldCall {
	h := HeldCall{Server: p.Server, Tool: p.Tool, Step: p.Step, Call: p.Call, Taint: p.Taint}
	if rec != nil {
		if c := rec.ToolBody().ToolCall; len(c.Arguments) > 0 {
			h.Arguments, h.Whole = indentJSON(c.Arguments), true
			return h
		}
	}
	h.Arguments = indentJSON([]byte(p.Arguments))
	why := "the transcript has no record of this call"
	if unread != "" {
		why = "the transcript was not read: " + unread
	}
	if json.Valid([]byte(p.Arguments)) {
		h.Note = fmt.Sprintf("These arguments are the run's status's copy, which is whole (%s).", why)
	} else {
		h.Note = fmt.Sprintf("These arguments are cut: the run's status keeps their first 4 KiB, and %s. "+
			"Read them whole with kubectl baton transcript --step %d before you approve.", why, p.Step)
	}
	return h
}

// indentJSON is JSON indented, or the text as it is when it is not JSON.
func indentJSON(data []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		return string(data)
	}
	return b.String()
}

// GuardedText names the text a guardrail's gate holds: a call's result, the step's input or its
// output.
func GuardedText(g v1alpha1.PendingGuard) string {
	switch g.Stage {
	case v1alpha1.StageToolResult:
		return fmt.Sprintf("the result of call %d", g.Call)
	case v1alpha1.StageModelInput:
		return "the input"
	}
	return "the output"
}
