package v1alpha1

import (
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Decision actions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionReply   = "reply"
)

// Decision record values in status.approvals.
const (
	RecordApproved = "Approved"
	RecordRejected = "Rejected"
	RecordReplied  = "Replied"
)

// Bounds of decision values. Longer values are kept one character past the bound, so that the
// operator can say they were too long without storing them whole.
const (
	MaxDecisionValue = 4096
	// MaxQueuedDecisions bounds the decisions waiting for the operator on one run.
	MaxQueuedDecisions = 32
	// ReviseReplan sends a rejected run back to its entrypoint.
	ReviseReplan = "replan"
	// ByTimeout is the approver recorded when a gate's timeout approves it.
	ByTimeout = "timeout"
	// ByUnverified is the approver recorded when no admission webhook said who decided.
	ByUnverified = "unverified (no admission webhook)"
)

// QueuedDecision is one human decision waiting for the operator, as the admission webhook (or,
// without it, the operator itself) recorded it from the annotations.
type QueuedDecision struct {
	// Seq orders the run's decisions; each is applied once, in order.
	Seq int64 `json:"seq"`
	// Action is approve, reject or reply.
	Action string `json:"action"`
	// Gate is the gate an approve or reject names.
	Gate string `json:"gate,omitempty"`
	// Revise is where a reject sends the run: an agent or replan.
	Revise string `json:"revise,omitempty"`
	// Feedback goes with the decision to the next agent.
	Feedback string `json:"feedback,omitempty"`
	// Reply is a reply's text.
	Reply string `json:"reply,omitempty"`
	// By is the Kubernetes user who made the decision.
	By string `json:"by"`
	// Time is when the decision was admitted.
	Time metav1.Time `json:"time"`
}

// Decisions reads a run's queued decisions, oldest first.
func Decisions(annotations map[string]string) ([]QueuedDecision, error) {
	raw, ok := annotations[AnnotationDecisions]
	if !ok || raw == "" {
		return nil, nil
	}
	var out []QueuedDecision
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("annotation %s is not a list of decisions: %w", AnnotationDecisions, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// SetDecisions writes the queue back, dropping the annotation when the queue is empty.
func SetDecisions(annotations map[string]string, queue []QueuedDecision) map[string]string {
	if annotations == nil {
		annotations = map[string]string{}
	}
	if len(queue) == 0 {
		delete(annotations, AnnotationDecisions)
		return annotations
	}
	data, _ := json.Marshal(queue)
	annotations[AnnotationDecisions] = string(data)
	return annotations
}

// TakeDecision turns the decision annotations (approve, reject or reply, with revise and
// feedback) into a queued decision and removes them. ok is false when there is none.
func TakeDecision(annotations map[string]string, by string, now metav1.Time) (d QueuedDecision, ok bool) {
	switch {
	case has(annotations, AnnotationApprove):
		d = QueuedDecision{Action: DecisionApprove, Gate: cut(annotations[AnnotationApprove])}
	case has(annotations, AnnotationReject):
		d = QueuedDecision{Action: DecisionReject, Gate: cut(annotations[AnnotationReject]), Revise: cut(annotations[AnnotationRevise])}
	case has(annotations, AnnotationReply):
		d = QueuedDecision{Action: DecisionReply, Reply: cut(annotations[AnnotationReply])}
	default:
		return QueuedDecision{}, false
	}
	d.Feedback = cut(annotations[AnnotationFeedback])
	d.By, d.Time = by, now
	for _, k := range []string{AnnotationApprove, AnnotationReject, AnnotationRevise, AnnotationReply, AnnotationFeedback} {
		delete(annotations, k)
	}
	return d, true
}

// AddDecision queues d in the annotations, after the run's latest decision. An unreadable queue
// is replaced: only Baton writes it.
func AddDecision(annotations map[string]string, d QueuedDecision, lastApplied int64) (map[string]string, error) {
	queue, err := Decisions(annotations)
	if err != nil {
		queue = nil
	}
	if queue, err = Enqueue(queue, d, lastApplied); err != nil {
		return annotations, err
	}
	return SetDecisions(annotations, queue), nil
}

// Enqueue appends d after the run's latest decision, dropping those the run has applied.
func Enqueue(queue []QueuedDecision, d QueuedDecision, lastApplied int64) ([]QueuedDecision, error) {
	next := lastApplied
	kept := queue[:0:0]
	for _, q := range queue {
		next = max(next, q.Seq)
		if q.Seq > lastApplied {
			kept = append(kept, q)
		}
	}
	if len(kept) >= MaxQueuedDecisions {
		return nil, fmt.Errorf("%d decisions on this run are already waiting for the operator; try again once it has taken them", len(kept))
	}
	d.Seq = next + 1
	return append(kept, d), nil
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func cut(s string) string {
	r := []rune(s)
	if len(r) > MaxDecisionValue+1 {
		return string(r[:MaxDecisionValue+1])
	}
	return s
}
