package v1alpha1

import "strconv"

// TurnNumber is a turn's number in its session, as the admission webhook numbered it
// (AnnotationTurn); 0 if it has none.
func TurnNumber(run *AgentRun) int64 {
	n, err := strconv.ParseInt(run.Annotations[AnnotationTurn], 10, 32)
	if err != nil || n < 1 {
		return 0
	}
	return n
}
