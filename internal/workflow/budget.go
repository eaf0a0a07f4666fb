package workflow

import (
	"encoding/json"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// StatusBudget is the most bytes a run's status takes as JSON, whatever its agents said: far
// below the API server's request limit (3 MiB) and etcd's value limit (1.5 MiB), and small
// enough that watching thousands of runs stays cheap.
const StatusBudget = 64 << 10

// FitStatus makes the status fit StatusBudget. Every text of the status is bounded on its own;
// together, on a long run full of escaped characters, they can still pass the budget, and then
// the least useful parts give way first: old feedback texts (the agents already had them), the
// oldest handoff records (their step numbers say where the rest fall), the context texts, then
// the longest texts. Each stage runs only while the status is over the budget.
func FitStatus(s *v1alpha1.AgentRunStatus) {
	for _, shrink := range shrinkStages {
		if statusSize(s) <= StatusBudget {
			return
		}
		shrink(s)
	}
}

// statusSize is the status's size as JSON.
func statusSize(s *v1alpha1.AgentRunStatus) int {
	data, err := json.Marshal(s)
	if err != nil {
		return 0
	}
	return len(data)
}

// shrinkStages are FitStatus's stages, mildest first. The last leaves at most a few KiB of
// text in all, so any status fits after it.
var shrinkStages = []func(*v1alpha1.AgentRunStatus){
	func(s *v1alpha1.AgentRunStatus) { cutFeedback(s, 256) },
	func(s *v1alpha1.AgentRunStatus) { keepRecords(s, 20, 128) },
	func(s *v1alpha1.AgentRunStatus) { keepApprovals(s, 16) },
	func(s *v1alpha1.AgentRunStatus) { cutTexts(s, 8192, 2048, 512) },
	func(s *v1alpha1.AgentRunStatus) {
		cutFeedback(s, 64)
		keepRecords(s, 5, 64)
		keepApprovals(s, 4)
		cutTexts(s, 2048, 512, 256)
	},
}

func cutFeedback(s *v1alpha1.AgentRunStatus, n int) {
	for i := range s.Approvals {
		s.Approvals[i].Feedback = statusText(s.Approvals[i].Feedback, n)
	}
}

func keepRecords(s *v1alpha1.AgentRunStatus, keep, reason int) {
	if over := len(s.HandoffSequence) - keep; over > 0 {
		s.HandoffSequence = append([]v1alpha1.HandoffRecord(nil), s.HandoffSequence[over:]...)
	}
	for i := range s.HandoffSequence {
		s.HandoffSequence[i].Reason = statusText(s.HandoffSequence[i].Reason, reason)
	}
}

func keepApprovals(s *v1alpha1.AgentRunStatus, keep int) {
	if over := len(s.Approvals) - keep; over > 0 {
		s.Approvals = append([]v1alpha1.ApprovalRecord(nil), s.Approvals[over:]...)
	}
}

// cutTexts bounds the long texts: what the agents said and were given, what people were asked,
// and the messages.
func cutTexts(s *v1alpha1.AgentRunStatus, text, question, message int) {
	s.Input = statusText(s.Input, text)
	s.Output = statusText(s.Output, text)
	s.TerminationMessage = statusText(s.TerminationMessage, message)
	if s.PendingInput != nil {
		s.PendingInput.Question = statusText(s.PendingInput.Question, question)
	}
	for i := range s.Conditions {
		s.Conditions[i].Message = statusText(s.Conditions[i].Message, message)
	}
}
