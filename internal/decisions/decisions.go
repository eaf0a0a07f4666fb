// Package decisions is the queue of people's decisions on a run: the approvals, rejections and
// replies they made with annotations, waiting for the operator. It is kept in the run's
// agents.baton.dev/decisions annotation as a JSON list, oldest first. The admission webhook
// writes it (and the controller, where the webhook is not installed); the controller reads it,
// and the workflow core applies each decision.
package decisions

import (
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Actions of a decision.
const (
	Approve = "approve"
	Reject  = "reject"
	Reply   = "reply"
)

// Bounds of a decision. Longer values are kept one character past the bound, so that the
// operator can say they were too long without storing them whole.
const (
	// MaxValue bounds a decision's feedback and reply, in characters.
	MaxValue = 4096
	// MaxQueued bounds the decisions waiting for the operator on one run.
	MaxQueued = 32
)

// Queued is one decision waiting for the operator, as the admission webhook (or, without it,
// the operator itself) recorded it from the annotations.
type Queued struct {
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

// Read reads a run's queued decisions, oldest first.
func Read(annotations map[string]string) ([]Queued, error) {
	raw, ok := annotations[v1alpha1.AnnotationDecisions]
	if !ok || raw == "" {
		return nil, nil
	}
	var out []Queued
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("annotation %s is not a list of decisions: %w", v1alpha1.AnnotationDecisions, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// Write writes the queue back, dropping the annotation when the queue is empty.
func Write(annotations map[string]string, queue []Queued) map[string]string {
	if annotations == nil {
		annotations = map[string]string{}
	}
	if len(queue) == 0 {
		delete(annotations, v1alpha1.AnnotationDecisions)
		return annotations
	}
	data, _ := json.Marshal(queue)
	annotations[v1alpha1.AnnotationDecisions] = string(data)
	return annotations
}

// Take turns the decision annotations (approve, reject or reply, with revise and
// feedback) into a queued decision and removes them. ok is false when there is none.
func Take(annotations map[string]string, by string, now metav1.Time) (d Queued, ok bool) {
	switch {
	case has(annotations, v1alpha1.AnnotationApprove):
		d = Queued{Action: Approve, Gate: cut(annotations[v1alpha1.AnnotationApprove])}
	case has(annotations, v1alpha1.AnnotationReject):
		d = Queued{Action: Reject, Gate: cut(annotations[v1alpha1.AnnotationReject]), Revise: cut(annotations[v1alpha1.AnnotationRevise])}
	case has(annotations, v1alpha1.AnnotationReply):
		d = Queued{Action: Reply, Reply: cut(annotations[v1alpha1.AnnotationReply])}
	default:
		return Queued{}, false
	}
	d.Feedback = cut(annotations[v1alpha1.AnnotationFeedback])
	d.By, d.Time = by, now
	for _, k := range []string{v1alpha1.AnnotationApprove, v1alpha1.AnnotationReject, v1alpha1.AnnotationRevise, v1alpha1.AnnotationReply, v1alpha1.AnnotationFeedback} {
		delete(annotations, k)
	}
	return d, true
}

// Annotations are the annotations a person writes to make decision d: the inverse of Take.
// kubectl baton and the console write these, as anyone could with kubectl annotate, so that the
// admission webhook takes them like any other.
func Annotations(d Queued) map[string]string {
	set := map[string]string{}
	switch d.Action {
	case Approve:
		set[v1alpha1.AnnotationApprove] = d.Gate
	case Reject:
		set[v1alpha1.AnnotationReject] = d.Gate
		if d.Revise != "" {
			set[v1alpha1.AnnotationRevise] = d.Revise
		}
	case Reply:
		set[v1alpha1.AnnotationReply] = d.Reply
	}
	if d.Feedback != "" {
		set[v1alpha1.AnnotationFeedback] = d.Feedback
	}
	return set
}

// Add queues d in the annotations, after the run's latest decision. An unreadable queue
// is replaced: only Baton writes it.
func Add(annotations map[string]string, d Queued, lastApplied int64) (map[string]string, error) {
	queue, err := Read(annotations)
	if err != nil {
		queue = nil
	}
	if queue, err = Enqueue(queue, d, lastApplied); err != nil {
		return annotations, err
	}
	return Write(annotations, queue), nil
}

// Enqueue appends d after the run's latest decision, dropping those the run has applied.
func Enqueue(queue []Queued, d Queued, lastApplied int64) ([]Queued, error) {
	next := lastApplied
	kept := queue[:0:0]
	for _, q := range queue {
		next = max(next, q.Seq)
		if q.Seq > lastApplied {
			kept = append(kept, q)
		}
	}
	if len(kept) >= MaxQueued {
		return nil, fmt.Errorf("%d decisions on this run are already waiting for the operator; try again once it has taken them", len(kept))
	}
	d.Seq = next + 1
	return append(kept, d), nil
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func cut(s string) string {
	r := []rune(s)
	if len(r) > MaxValue+1 {
		return string(r[:MaxValue+1])
	}
	return s
}
