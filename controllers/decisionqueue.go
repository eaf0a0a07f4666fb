package controllers

import (
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// The decision queue: the decisions people made with annotations, waiting for the operator,
// kept in the run's agents.baton.dev/decisions annotation as JSON. The admission webhook writes
// it (and the controller, where the webhook is not installed); the controller reads it.

// Decisions reads a run's queued decisions, oldest first.
func Decisions(annotations map[string]string) ([]v1alpha1.QueuedDecision, error) {
	raw, ok := annotations[v1alpha1.AnnotationDecisions]
	if !ok || raw == "" {
		return nil, nil
	}
	var out []v1alpha1.QueuedDecision
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("annotation %s is not a list of decisions: %w", v1alpha1.AnnotationDecisions, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// SetDecisions writes the queue back, dropping the annotation when the queue is empty.
func SetDecisions(annotations map[string]string, queue []v1alpha1.QueuedDecision) map[string]string {
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

// TakeDecision turns the decision annotations (approve, reject or reply, with revise and
// feedback) into a queued decision and removes them. ok is false when there is none.
func TakeDecision(annotations map[string]string, by string, now metav1.Time) (d v1alpha1.QueuedDecision, ok bool) {
	switch {
	case has(annotations, v1alpha1.AnnotationApprove):
		d = v1alpha1.QueuedDecision{Action: v1alpha1.DecisionApprove, Gate: cut(annotations[v1alpha1.AnnotationApprove])}
	case has(annotations, v1alpha1.AnnotationReject):
		d = v1alpha1.QueuedDecision{Action: v1alpha1.DecisionReject, Gate: cut(annotations[v1alpha1.AnnotationReject]), Revise: cut(annotations[v1alpha1.AnnotationRevise])}
	case has(annotations, v1alpha1.AnnotationReply):
		d = v1alpha1.QueuedDecision{Action: v1alpha1.DecisionReply, Reply: cut(annotations[v1alpha1.AnnotationReply])}
	default:
		return v1alpha1.QueuedDecision{}, false
	}
	d.Feedback = cut(annotations[v1alpha1.AnnotationFeedback])
	d.By, d.Time = by, now
	for _, k := range []string{v1alpha1.AnnotationApprove, v1alpha1.AnnotationReject, v1alpha1.AnnotationRevise, v1alpha1.AnnotationReply, v1alpha1.AnnotationFeedback} {
		delete(annotations, k)
	}
	return d, true
}

// AddDecision queues d in the annotations, after the run's latest decision. An unreadable queue
// is replaced: only Baton writes it.
func AddDecision(annotations map[string]string, d v1alpha1.QueuedDecision, lastApplied int64) (map[string]string, error) {
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
func Enqueue(queue []v1alpha1.QueuedDecision, d v1alpha1.QueuedDecision, lastApplied int64) ([]v1alpha1.QueuedDecision, error) {
	next := lastApplied
	kept := queue[:0:0]
	for _, q := range queue {
		next = max(next, q.Seq)
		if q.Seq > lastApplied {
			kept = append(kept, q)
		}
	}
	if len(kept) >= v1alpha1.MaxQueuedDecisions {
		return nil, fmt.Errorf("%d decisions on this run are already waiting for the operator; try again once it has taken them", len(kept))
	}
	d.Seq = next + 1
	return append(kept, d), nil
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func cut(s string) string {
	r := []rune(s)
	if len(r) > v1alpha1.MaxDecisionValue+1 {
		return string(r[:v1alpha1.MaxDecisionValue+1])
	}
	return s
}
