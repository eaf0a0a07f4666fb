package notify

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Content types of the bodies.
const (
	ContentCloudEvents = "application/cloudevents+json; charset=utf-8"
	ContentJSON        = "application/json; charset=utf-8"
)

// TypePrefix begins every CloudEvent's type: dev.baton.GateOpened, ...
const TypePrefix = "dev.baton."

// maxExcerpt bounds, in characters, the excerpt of what waits that a Slack message quotes.
const maxExcerpt = 2000

// data is a CloudEvent's data: the event without what the envelope says.
type data struct {
	Namespace string             `json:"namespace"`
	Run       string             `json:"run"`
	Config    string             `json:"config"`
	Gate      string             `json:"gate,omitempty"`
	Waiting   *Waiting           `json:"waiting,omitempty"`
	Deciders  *v1alpha1.Deciders `json:"deciders,omitempty"`
	Deadline  string             `json:"deadline,omitempty"`
	Decision  string             `json:"decision,omitempty"`
	Reason    string             `json:"reason,omitempty"`
	Message   string             `json:"message,omitempty"`
	URL       string             `json:"url,omitempty"`
}

// Body is the event as a sink of format f is sent it, and its content type.
func Body(e Event, f v1alpha1.NotifyFormat) ([]byte, string, error) {
	if f == v1alpha1.NotifySlack {
		b, err := json.Marshal(slackMessage(e))
		return b, ContentJSON, err
	}
	b, err := cloudEvent(e)
	return b, ContentCloudEvents, err
}

// cloudEvent is the event as a CloudEvent 1.0 in structured JSON.
func cloudEvent(e Event) ([]byte, error) {
	ce := event.New()
	ce.SetID(e.ID)
	ce.SetType(TypePrefix + string(e.Type))
	ce.SetSource(fmt.Sprintf("/namespaces/%s/agentconfigs/%s", e.Namespace, e.Config))
	ce.SetSubject("agentruns/" + e.Run)
	ce.SetTime(e.Time)
	d := data{Namespace: e.Namespace, Run: e.Run, Config: e.Config, Gate: e.Gate, Waiting: e.Waiting, Deciders: e.Deciders,
		Decision: e.Decision, Reason: e.Reason, Message: e.Message, URL: e.URL}
	if e.Deadline != nil {
		d.Deadline = e.Deadline.UTC().Format("2006-01-02T15:04:05Z07:00")
	}
	if err := ce.SetData(event.ApplicationJSON, d); err != nil {
		return nil, err
	}
	if err := ce.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(ce)
}

// slack is an incoming webhook's message.
type slack struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type string     `json:"type"`
	Text *slackText `json:"text,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// slackMessage names the run and the gate, quotes an excerpt of what waits (plain text, so
// nothing in it is read as markup or a mention) with its SHA-256, and links to the console.
func slackMessage(e Event) slack {
	head := headline(e)
	m := slack{Text: head, Blocks: []slackBlock{{Type: "section", Text: &slackText{Type: "mrkdwn", Text: escape(head)}}}}
	if w := e.Waiting; w != nil {
		text := w.Output
		if text == "" {
			text = w.ToolCall
		}
		m.Blocks = append(m.Blocks,
			slackBlock{Type: "section", Text: &slackText{Type: "plain_text", Text: excerpt(text)}},
			slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "SHA-256 of what waits: `" + w.SHA256 + "`"}})
	}
	if e.URL != "" {
		m.Blocks = append(m.Blocks, slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "<" + escape(e.URL) + "|Open in the Baton console>"}})
	}
	return m
}

// headline says the event in a line.
func headline(e Event) string {
	run := e.Namespace + "/" + e.Run
	switch e.Type {
	case v1alpha1.NotifyGateOpened:
		return fmt.Sprintf("Run %s waits at gate %s (config %s)", run, e.Gate, e.Config)
	case v1alpha1.NotifyGateReminder:
		return fmt.Sprintf("Reminder: run %s still waits at gate %s", run, e.Gate)
	case v1alpha1.NotifyGateEscalated:
		return fmt.Sprintf("Escalated: run %s has waited at gate %s too long%s", run, e.Gate, deciders(e.Deciders))
	case v1alpha1.NotifyGateDecided:
		return fmt.Sprintf("Gate %s of run %s: %s%s", e.Gate, run, e.Decision, by(e.Reason))
	case v1alpha1.NotifyRunEnded:
		return fmt.Sprintf("Run %s ended %s%s", run, e.Decision, by(e.Reason))
	default:
		return fmt.Sprintf("Run %s: %s", run, e.Message)
	}
}

func by(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

func deciders(d *v1alpha1.Deciders) string {
	if d == nil {
		return ""
	}
	names := append(append([]string(nil), d.Users...), d.Groups...)
	if len(names) == 0 {
		return ""
	}
	return "; deciders: " + strings.Join(names, ", ")
}

// escape escapes what Slack reads as markup in mrkdwn text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// excerpt is at most maxExcerpt characters of text.
func excerpt(text string) string {
	if r := []rune(text); len(r) > maxExcerpt {
		return string(r[:maxExcerpt-1]) + "…"
	}
	if text == "" {
		return "(empty)"
	}
	return text
}
