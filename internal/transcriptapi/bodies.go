package transcriptapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// StepBody is what readers use of a step's or a decision's record body.
type StepBody struct {
	Agent    string `json:"agent"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Input    string `json:"input"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Output       string   `json:"output"`
	Handoff      string   `json:"handoff"`
	Reason       string   `json:"reason"`
	Signal       string   `json:"signal"`
	FinishReason string   `json:"finishReason"`
	Tokens       int64    `json:"tokens"`
	InputTokens  int64    `json:"inputTokens"`
	ToolCalls    int32    `json:"toolCalls"`
	Ignored      []string `json:"ignoredToolCalls"`
	Error        string   `json:"error"`
	TimedOut     bool     `json:"timedOut"`
	LatencyMs    int64    `json:"latencyMs"`
	Routing      *struct {
		Target     string   `json:"target"`
		Confidence *float64 `json:"confidence"`
		Reason     string   `json:"reason"`
	} `json:"routing"`
	Context []struct {
		Step int32  `json:"step"`
		From string `json:"from"`
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"context"`
	// Previous is, in a step's record, the handoff record of the step before: with status's
	// latest ones, the records give every step's handoff.
	Previous *v1alpha1.HandoffRecord `json:"previous"`
	// Decisions are, in a decision's record, the decisions it applied, whole.
	Decisions []Decided `json:"decisions"`
}

// Decided is a decision as its record keeps it: as status has it, with a reply's text.
type Decided struct {
	v1alpha1.ApprovalRecord
	Reply string `json:"reply"`
}

// String says in words who decided what; the feedback and replies are in the record's context.
func (d Decided) String() string {
	s := d.Decision + prefixed(" ", d.Gate) + " by " + d.By
	if d.Revise != "" {
		s += ", back to " + d.Revise
	}
	return s
}

// StepBody reads a step's or a decision's record body.
func (r Record) StepBody() StepBody { return bodyAs[StepBody](r) }

// bodyAs reads a record's body as T; what does not fit is left zero.
func bodyAs[T any](r Record) T {
	var b T
	_ = json.Unmarshal(r.Body, &b)
	return b
}

// Next says in words what a step asked for.
func (b StepBody) Next() string {
	switch {
	case b.Error != "":
		return "failed"
	case b.Routing != nil:
		s := "route to " + b.Routing.Target
		if b.Routing.Confidence != nil {
			s += fmt.Sprintf(" (confidence %.2f)", *b.Routing.Confidence)
		}
		return s + prefixed(": ", b.Routing.Reason)
	case b.Handoff != "":
		return "hand off to " + b.Handoff + prefixed(": ", b.Reason)
	case b.Signal != "":
		return "signal " + b.Signal
	case b.FinishReason == "length":
		return "cut at the output-token limit"
	}
	return "answer"
}

// ToolBody is what readers use of a tool record's body: a turn that asked for calls, a call's
// outcome, the mark of a call being sent, or a step held at a tool's gate.
type ToolBody struct {
	Agent  string     `json:"agent"`
	Text   string     `json:"text"`
	Tokens int64      `json:"tokens"`
	Calls  []ToolCall `json:"calls"`
	ToolCall
	Content        string    `json:"content"`
	IsError        bool      `json:"isError"`
	Refused        string    `json:"refused"`
	ApprovedBy     []string  `json:"approvedBy"`
	IdempotencyKey string    `json:"idempotencyKey"`
	LatencyMs      int64     `json:"latencyMs"`
	Gate           string    `json:"gate"`
	Call           *ToolCall `json:"call"`
}

// ToolCall is one call a model asked for.
type ToolCall struct {
	Index     int32           `json:"index"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

func (c ToolCall) String() string {
	return fmt.Sprintf("#%d %s/%s %s", c.Index, c.Server, c.Tool, strings.TrimSpace(string(c.Arguments)))
}

// IsTool says whether the record is one of a tool call's.
func (r Record) IsTool() bool { return strings.HasPrefix(string(r.Kind), "tool") }

// ToolBody reads a tool record's body.
func (r Record) ToolBody() ToolBody { return bodyAs[ToolBody](r) }

// Note says how a call went, when it did not simply succeed.
func (b ToolBody) Note() string {
	switch {
	case b.Refused != "":
		return "not made: " + b.Refused
	case b.IsError:
		return "error"
	case len(b.ApprovedBy) > 0:
		return "approved by " + strings.Join(b.ApprovedBy, ", ")
	}
	return ""
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
