package runview

import (
	"cmp"
	"slices"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// SortTurns puts a session's turns in their order: by number, then creation, then name.
func SortTurns(turns []v1alpha1.AgentRun) {
	slices.SortFunc(turns, func(a, b v1alpha1.AgentRun) int {
		return cmp.Or(cmp.Compare(v1alpha1.TurnNumber(&a), v1alpha1.TurnNumber(&b)),
			a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
}
