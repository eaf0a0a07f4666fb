package v1alpha1

// Decision record values in status.approvals.
const (
	RecordApproved = "Approved"
	RecordRejected = "Rejected"
	RecordReplied  = "Replied"
	// RecordTimedOut is a gate whose timeout passed with nobody's decision, and whose
	// onTimeout: Approve let the run go on. Nobody approved it.
	RecordTimedOut = "TimedOut"
)

// Values people and the operator write in decisions and status.approvals.
const (
	// ReviseReplan sends a rejected run back to its entrypoint.
	ReviseReplan = "replan"
	// ByTimeout is the approver recorded when a gate's timeout approves it.
	ByTimeout = "timeout"
	// ByUnverified is the approver recorded when no admission webhook said who decided.
	ByUnverified = "unverified (no admission webhook)"
)
