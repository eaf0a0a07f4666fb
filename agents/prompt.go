package agents

import (
	"fmt"
	"strings"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Messages builds what a model sees for one step, in order:
//
//  1. system: the agent's instructions, who it is, the agents it may hand off to (and, for an
//     agent with parallel, how to fan out to several), the signals it may emit, for a supervisor
//     the agents it routes to, and its output schema;
//  2. user: the task (the run's input);
//  3. user: the earlier steps in the context window, oldest first, if any;
//  4. user: why it has control, and its input;
//  5. for the run's last turn after a limit ran out (wrap-up): which limit, and a request for
//     the final answer (user); for a truncated answer: the answer so far (assistant) and a
//     request to continue (user);
//     for an answer that failed its schema: the errors, the answer and the schema (user).
func Messages(req Request) []workflow.Message {
	msgs := []workflow.Message{{Role: "system", Content: systemPrompt(req)}, {Role: "user", Content: "Task:\n" + req.Task}}
	if len(req.Context) > 0 {
		var b strings.Builder
		b.WriteString("Earlier in this run, oldest first:")
		for _, c := range req.Context {
			fmt.Fprintf(&b, "\n\n[step %d] %s", c.Step, describeContext(c))
			b.WriteString(c.Text)
		}
		msgs = append(msgs, workflow.Message{Role: "user", Content: b.String()})
	}
	turn := "You have control"
	if req.Reason != "" {
		turn += " (" + req.Reason + ")"
	}
	if req.Input != "" && req.Input != req.Task {
		turn += ". Your input:\n" + req.Input
	} else {
		turn += ". Work on the task."
	}
	msgs = append(msgs, workflow.Message{Role: "user", Content: turn})
	switch {
	case req.WrapUp != "":
		msgs = append(msgs, workflow.Message{Role: "user", Content: req.WrapUp +
			" This is its last turn: give the final answer now, from what the team has done so far. You cannot hand off or call tools."})
	case req.Continuation != "":
		msgs = append(msgs,
			workflow.Message{Role: "assistant", Content: req.Continuation},
			workflow.Message{Role: "user", Content: "Your answer was cut off at the output-token limit. Continue exactly where it stopped, without repeating anything."})
	case req.Repair != nil:
		msgs = append(msgs, workflow.Message{Role: "user", Content: fmt.Sprintf(
			"Your answer did not match the required JSON Schema.\nErrors:\n%s\n\nYour answer was:\n%s\n\nAnswer again with only a JSON value that matches this schema:\n%s",
			req.Repair.Errors, req.Repair.Output, schemaText(req.Agent))})
	}
	return msgs
}

func describeContext(c workflow.ContextEntry) string {
	switch c.Kind {
	case workflow.ContextFeedback:
		return "feedback from " + c.From + ": "
	case workflow.ContextReply:
		return "reply from " + c.From + ": "
	case workflow.ContextTimedOut:
		return c.From + ", nobody decided: "
	case workflow.ContextFailed:
		return c.From + " failed: "
	case workflow.ContextTruncated:
		return c.From + " (cut off): "
	case workflow.ContextInvalid:
		return c.From + "'s answer did not match its schema: "
	case workflow.ContextAsked:
		return "earlier in this conversation, " + c.From + " asked: "
	case workflow.ContextAnswered:
		return "earlier in this conversation, the team answered: "
	case workflow.ContextSummary:
		return "the conversation before that, summarized: "
	}
	return c.From + ": "
}

func systemPrompt(req Request) string {
	var b strings.Builder
	if req.Agent.Instructions != "" {
		b.WriteString(strings.TrimSpace(req.Agent.Instructions))
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "You are the agent %q in a team of agents.", req.Agent.Name)
	if req.Agent.Description != "" {
		fmt.Fprintf(&b, " Your role: %s", req.Agent.Description)
	}
	if len(req.Peers) > 0 {
		b.WriteString("\n\nTo hand the work to another agent, call its transfer tool with your reason:")
		for _, p := range req.Peers {
			fmt.Fprintf(&b, "\n- %s: %s", p.Name, p.Description)
		}
		if n := req.MaxBranches(); n > 0 {
			fmt.Fprintf(&b, "\nTo hand the work to several of them at once, to work in parallel, call fan_out with up to %d branches, each an agent and its input.", n)
		}
	}
	if len(req.Children) > 0 {
		b.WriteString("\n\nYou route the work. Call route with the agent best suited, your confidence from 0 to 1, a one-line reason, and a fallback agent:")
		for _, p := range req.Children {
			fmt.Fprintf(&b, "\n- %s: %s", p.Name, p.Description)
		}
		b.WriteString("\nAnswer without calling route only when the work is done.")
	}
	if len(req.Signals) > 0 {
		b.WriteString("\n\nSignals you may emit, with emit_signal or on a line of their own:")
		for _, s := range req.Signals {
			fmt.Fprintf(&b, "\n- %s", s.Name)
			if s.Description != "" {
				fmt.Fprintf(&b, ": %s", s.Description)
			}
		}
	}
	if req.Agent.OutputSchema != nil {
		fmt.Fprintf(&b, "\n\nAnswer with only a JSON value that matches this JSON Schema:\n%s", schemaText(req.Agent))
	}
	return b.String()
}

func schemaText(a v1alpha1.Agent) string {
	if a.OutputSchema == nil {
		return "{}"
	}
	return string(a.OutputSchema.Raw)
}
