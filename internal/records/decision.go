package records

import (
	"hash/fnv"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// DecisionBody is the record of people's decisions that a status write applies: who decided what
// (and gates' timeouts), and the feedback and replies that add to what later agents see, in full.
type DecisionBody struct {
	// Decisions are the decisions applied, in order.
	Decisions []workflow.Decided      `json:"decisions,omitempty"`
	Context   []workflow.ContextEntry `json:"context"`
	// Input is the next agent's whole input as the decisions left it, when status holds only its
	// beginning.
	Input string `json:"input,omitempty"`
}

// DecisionKey is the key of the record of the decisions a status applied: people's decisions
// are keyed by the last one's number.
func DecisionKey(st *v1alpha1.AgentRunStatus) transcript.Key {
	return transcript.Key{Kind: transcript.KindDecision, Step: st.StepCount, Call: int32(st.LastDecision)}
}

// Record is the record of the decisions the status st applies. A write that applies only a
// gate's timeout is keyed by the gate too, since no decision of a person numbers it.
func (b DecisionBody) Record(run RunID, st *v1alpha1.AgentRunStatus, now time.Time) transcript.Record {
	key := DecisionKey(st)
	if len(b.Decisions) > 0 && !byPeople(b.Decisions) {
		key.Attempt = timeoutKey(b.Decisions[0])
	}
	return run.Record(key, now, transcript.Body(b))
}

// byPeople reports whether a person made any of the decisions.
func byPeople(decided []workflow.Decided) bool {
	for _, d := range decided {
		if d.By != v1alpha1.ByTimeout {
			return true
		}
	}
	return false
}

// timeoutKey tells apart the timeouts of the gates a run passes between two of people's
// decisions at one step: a gate times out at most once there, and a tool's gate once per call.
func timeoutKey(d workflow.Decided) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(d.Gate))
	return 1 + int32((h.Sum32()^uint32(d.ToolCall)*2654435761)>>2)
}

// Said says in words who decided what; the feedback and replies are in the record's context.
func Said(d workflow.Decided) string {
	s := d.Decision + prefixed(" ", d.Gate) + " by " + d.By
	if d.Revise != "" {
		s += ", back to " + d.Revise
	}
	return s
}

// joinAttempt keys a join's record apart from people's decisions and gates' timeouts (whose keys
// are positive).
const joinAttempt = -1

// JoinKey is the key of the record of the input a join gave its agent, whole: the branches'
// outputs, which status holds only the beginning of.
func JoinKey(st *v1alpha1.AgentRunStatus) transcript.Key {
	key := DecisionKey(st)
	key.Attempt = joinAttempt
	return key
}

// JoinRecord is the record of the input the join that st applies gave its agent.
func JoinRecord(run RunID, st *v1alpha1.AgentRunStatus, input string, now time.Time) transcript.Record {
	return run.Record(JoinKey(st), now, transcript.Body(DecisionBody{Input: input}))
}
