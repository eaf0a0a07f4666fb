package a2aagent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/agents/httpagent"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// MetadataKey is the key of Baton's part of a message's metadata, and of a data part that says
// where the answer goes.
const MetadataKey = "baton"

// message is the step's message: its input as text, and the rest of the step (the run, the
// context, whom the agent may hand off to, its signals, what is left of the limits) in the
// message's metadata, in the HTTP agent's request format, for agents that read it. A reply to a
// question continues the task that asked it.
func message(req *agents.Request) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(req.Input))
	m.ID = MessageID(req.RunUID, req.Step)
	m.ContextID = ContextID(req.RunUID)
	if req.RemoteTask != "" {
		m.TaskID = a2a.TaskID(req.RemoteTask)
	}
	step := httpagent.HTTPStepRequest{
		Run:     httpagent.HTTPRun{Namespace: req.Namespace, Name: req.Run, UID: req.RunUID},
		Step:    req.Step,
		Attempt: req.Attempt,
		Agent:   httpagent.HTTPAgentInfo{Name: req.Agent.Name, Description: req.Agent.Description, Instructions: req.Agent.Instructions},
		Task:    req.Task, Reason: req.Reason, Context: req.Context,
		Handoffs: req.Peers, Children: req.Children, Signals: req.Signals,
		Repair: req.Repair, LimitsLeft: req.Left, WrapUp: req.WrapUp, MaxBranches: req.MaxBranches(),
	}
	if req.Agent.OutputSchema != nil {
		step.OutputSchema = req.Agent.OutputSchema.Raw
	}
	m.Metadata = map[string]any{MetadataKey: step}
	return m
}

// control is what an agent's data part {"baton": {...}} says of where its answer goes, and what
// the step used.
type control struct {
	Handoff     string                    `json:"handoff,omitempty"`
	Reason      string                    `json:"reason,omitempty"`
	Signal      string                    `json:"signal,omitempty"`
	Routing     *v1alpha1.RoutingDecision `json:"routing,omitempty"`
	Parallel    []workflow.Branch         `json:"parallel,omitempty"`
	Tokens      int64                     `json:"tokens,omitempty"`
	InputTokens int64                     `json:"inputTokens,omitempty"`
}

// answer is the step's result from where the agent's task ended: a completed task's artifacts
// (or its last message), a question, or the agent's words for a task that failed.
func answer(req *agents.Request, f finalState) (*workflow.Result, error) {
	if f.message != nil {
		return result(req, f.message.Parts)
	}
	t := f.task
	var said string
	if t.Status.Message != nil {
		said = texts(t.Status.Message.Parts)
	}
	switch t.Status.State {
	case a2a.TaskStateCompleted:
		var parts a2a.ContentParts
		for _, a := range t.Artifacts {
			parts = append(parts, a.Parts...)
		}
		if len(parts) == 0 && t.Status.Message != nil {
			parts = t.Status.Message.Parts
		}
		return result(req, parts)
	case a2a.TaskStateInputRequired:
		if said == "" {
			said = "(the agent asks for input and says nothing more)"
		}
		return &workflow.Result{Output: said, InputRequired: true, RemoteTask: string(t.ID)}, nil
	case a2a.TaskStateAuthRequired:
		return nil, fmt.Errorf("the A2A agent's task %s needs authorization Baton cannot give: %s", t.ID, orNothing(said))
	case a2a.TaskStateCanceled:
		return nil, fmt.Errorf("the A2A agent canceled task %s: %s", t.ID, orNothing(said))
	default: // failed, rejected
		return nil, fmt.Errorf("the A2A agent's task %s is %s: %s", t.ID, strings.TrimPrefix(strings.ToLower(string(t.Status.State)), "task_state_"), orNothing(said))
	}
}

func orNothing(s string) string {
	if strings.TrimSpace(s) == "" {
		return "it said nothing more"
	}
	return s
}

// result is the answer the parts make: the text parts joined, or the data parts as JSON when
// the agent has an outputSchema or said nothing in text; a data part {"baton": {...}} or the
// text's last lines (HANDOFF:, SIGNAL:, REASON:) say where it goes.
func result(req *agents.Request, parts a2a.ContentParts) (*workflow.Result, error) {
	var text []string
	var data []any
	var c control
	for _, p := range parts {
		switch {
		case p.Data() != nil:
			if ctl, ok := controlOf(p.Data()); ok {
				c = ctl
				continue
			}
			data = append(data, p.Data())
		case p.Text() != "":
			text = append(text, p.Text())
		}
	}
	out := strings.Join(text, "\n")
	if c.Handoff == "" && c.Signal == "" {
		out, c = textControl(req, out, c)
	}
	if len(data) > 0 && (req.Agent.OutputSchema != nil || strings.TrimSpace(out) == "") {
		var v any = data
		if len(data) == 1 {
			v = data[0]
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: a data part cannot be read: %w", agents.ErrInvalidAnswer, err)
		}
		out = string(b)
	}
	return &workflow.Result{Output: out, Handoff: c.Handoff, Reason: c.Reason, Signal: c.Signal, Routing: c.Routing,
		Parallel: c.Parallel, Tokens: c.Tokens, InputTokens: c.InputTokens}, nil
}

// controlOf reads a data part {"baton": {...}}.
func controlOf(v any) (control, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return control{}, false
	}
	inner, ok := m[MetadataKey]
	if !ok {
		return control{}, false
	}
	b, err := json.Marshal(inner)
	if err != nil {
		return control{}, false
	}
	var c control
	if json.Unmarshal(b, &c) != nil {
		return control{}, false
	}
	return c, true
}

// textControl reads the text form of where an answer goes: its last lines, each "HANDOFF:
// <agent>", "SIGNAL: <name>" or "REASON: <text>", which are taken off the output. A handoff
// names one of the agent's peers and a signal one the config declares, else the line is text.
func textControl(req *agents.Request, out string, c control) (string, control) {
	lines := strings.Split(strings.TrimRight(out, "\n "), "\n")
	read := c
	n := len(lines)
	for n > 0 {
		key, value, ok := strings.Cut(lines[n-1], ":")
		value = strings.TrimSpace(value)
		if !ok {
			break
		}
		switch strings.TrimSpace(key) {
		case "HANDOFF":
			if !slices.ContainsFunc(req.Peers, func(p agents.Peer) bool { return p.Name == value }) {
				return out, c
			}
			read.Handoff = value
		case "SIGNAL":
			if !slices.ContainsFunc(req.Signals, func(s v1alpha1.Signal) bool { return s.Name == value }) {
				return out, c
			}
			read.Signal = value
		case "REASON":
			read.Reason = value
		default:
			return finish(lines, n, out, c, read)
		}
		n--
	}
	return finish(lines, n, out, c, read)
}

// finish takes the control lines from n on off the output, if they named a handoff or a
// signal.
func finish(lines []string, n int, out string, c, read control) (string, control) {
	if read.Handoff == "" && read.Signal == "" {
		return out, c
	}
	return strings.TrimRight(strings.Join(lines[:n], "\n"), "\n "), read
}

// texts joins the text parts.
func texts(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		if t := p.Text(); t != "" {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n")
}
