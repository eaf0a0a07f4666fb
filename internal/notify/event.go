// Package notify holds what a notification is, whatever sends it: the events of runs' gates,
// ends and budget warnings (Event), their bodies in each sink's format (CloudEvents 1.0
// structured JSON, a Slack incoming webhook's message), the signature a sink checks, and when a
// failed delivery is tried again. It makes no call: the outbox stores events, and the sender
// (internal/notify/sender) delivers them.
package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// MaxWaiting bounds, in bytes, what waits for a decision as an event carries it: longer, it is
// cut, and its SHA-256 is of the whole.
const MaxWaiting = 64 << 10

// Event is one notification, as the outbox keeps it until every sink took it.
type Event struct {
	// ID is unique per event and the same on every delivery of it.
	ID   string               `json:"id"`
	Type v1alpha1.NotifyEvent `json:"type"`
	Time time.Time            `json:"time"`

	Namespace string `json:"namespace"`
	Run       string `json:"run"`
	RunUID    string `json:"runUID"`
	Config    string `json:"config"`
	// Gate is the gate the event is of, for the gate events.
	Gate string `json:"gate,omitempty"`
	// Waiting is what waits for a decision at the gate.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Deciders are the users and groups the gate names, escalated ones included.
	Deciders *v1alpha1.Deciders `json:"deciders,omitempty"`
	// Deadline is when the gate times out, if it does.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Decision is how the gate was decided (Approved, Rejected, TimedOut) or how the run ended
	// (its phase), and Reason why (who decided, the termination reason).
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Message says the event in a sentence.
	Message string `json:"message,omitempty"`
	// URL links to the gate, or the run, in the console.
	URL string `json:"url,omitempty"`
}

// Waiting is what waits for a decision: the output of the step before the gate, or the tool
// call it holds, whole up to MaxWaiting bytes, and the SHA-256 of the whole.
type Waiting struct {
	Output   string `json:"output,omitempty"`
	ToolCall string `json:"toolCall,omitempty"`
	SHA256   string `json:"sha256"`
	// Truncated says the text was cut to MaxWaiting bytes.
	Truncated bool `json:"truncated,omitempty"`
}

// WaitingOutput is what waits when it is a step's output.
func WaitingOutput(text string) *Waiting {
	w := &Waiting{SHA256: digest(text)}
	w.Output, w.Truncated = cut(text)
	return w
}

// WaitingCall is what waits when it is a tool call: the tool and its arguments.
func WaitingCall(call string) *Waiting {
	w := &Waiting{SHA256: digest(call)}
	w.ToolCall, w.Truncated = cut(call)
	return w
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// cut is s within MaxWaiting bytes, on a character boundary.
func cut(s string) (string, bool) {
	if len(s) <= MaxWaiting {
		return s, false
	}
	n := MaxWaiting
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n], true
}
