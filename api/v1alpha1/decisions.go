package v1alpha1

import (
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
// without it, the operator itself) recorded it from the annotations. The queue is kept in the
// AnnotationDecisions annotation as a JSON list of these, oldest first; the controllers
// package reads and writes it.
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
