package agentsession

import (
	"strconv"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// TurnNumber is a turn's number in its session, as the webhook numbered it; 0 if it has none.
func TurnNumber(run *v1alpha1.AgentRun) int64 {
	n, err := strconv.ParseInt(run.Annotations[v1alpha1.AnnotationTurn], 10, 32)
	if err != nil || n < 1 {
		return 0
	}
	return n
}
