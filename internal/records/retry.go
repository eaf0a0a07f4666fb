package records

import "github.com/baton-dev/baton/api/v1alpha1"

// Retry is a new run of the same config, input, limits and approvals as run; with step > 0, one
// that continues where run was after that step (spec.from: the earlier run's transcript carries
// its input). The API server names it: run's name and a suffix.
func Retry(run *v1alpha1.AgentRun, step int32) *v1alpha1.AgentRun {
	retry := &v1alpha1.AgentRun{Spec: *run.Spec.DeepCopy()}
	// The API server shortens a long name to fit the random suffix.
	retry.Namespace, retry.GenerateName = run.Namespace, run.Name+"-retry-"
	if step > 0 {
		retry.Spec.From, retry.Spec.Input = &v1alpha1.RunFrom{Run: run.Name, Step: step}, ""
	}
	return retry
}
