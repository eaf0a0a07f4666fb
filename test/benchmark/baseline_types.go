package benchmark

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The baseline's API, bench.baton.dev/v1 BaselineRun. Its CRD is testdata/; the deep copies are
// written by hand, as the package has no code generation.

// baselineGV is the baseline's group and version.
var baselineGV = schema.GroupVersion{Group: "bench.baton.dev", Version: "v1"}

// addBaselineToScheme registers BaselineRun and its list.
func addBaselineToScheme(s *runtime.Scheme) {
	s.AddKnownTypes(baselineGV, &BaselineRun{}, &BaselineRunList{})
	metav1.AddToGroupVersion(s, baselineGV)
}

// Baseline phases.
const (
	baselineRunning   = "Running"
	baselineSucceeded = "Succeeded"
)

// baselineHistory is how many handoffs a BaselineRun's status keeps.
const baselineHistory = 10

// BaselineRun is one run of the baseline controller: steps handoffs, each after delay.
type BaselineRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to run.
	Spec BaselineRunSpec `json:"spec"`
	// status is the run's progress.
	Status BaselineRunStatus `json:"status,omitempty"`
}

// BaselineRunSpec is what to run.
type BaselineRunSpec struct {
	// steps is the number of handoffs before the run succeeds.
	Steps int32 `json:"steps"`
	// delay is how long each step takes.
	Delay *metav1.Duration `json:"delay,omitempty"`
	// outputBytes is the size of each step's output.
	OutputBytes int32 `json:"outputBytes,omitempty"`
	// input is the task given to the first agent.
	Input string `json:"input,omitempty"`
}

// BaselineRunStatus is a run's progress.
type BaselineRunStatus struct {
	// phase is Running, then Succeeded.
	Phase string `json:"phase,omitempty"`
	// step is the number of handoffs taken.
	Step int32 `json:"step,omitempty"`
	// currentAgent is the agent that has control.
	CurrentAgent string `json:"currentAgent,omitempty"`
	// lastOutput is the previous step's output: the baseline has no other store for it.
	LastOutput string `json:"lastOutput,omitempty"`
	// history holds the latest handoffs, oldest first.
	History []BaselineHandoff `json:"history,omitempty"`
	// startTime is when the first step started.
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the last step ended.
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// BaselineHandoff is one step's end: control passed from one agent to the next.
type BaselineHandoff struct {
	// step is the step's number, from 1.
	Step int32 `json:"step"`
	// from is the agent that took the step.
	From string `json:"from"`
	// to is the agent that has control after it.
	To string `json:"to,omitempty"`
	// time is when the step ended; microseconds, as the next step's delay is measured from it.
	Time metav1.MicroTime `json:"time"`
}

// BaselineRunList is a list of BaselineRuns.
type BaselineRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BaselineRun `json:"items"`
}

// DeepCopyInto copies the run into out.
func (in *BaselineRun) DeepCopyInto(out *BaselineRun) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Delay != nil {
		d := *in.Spec.Delay
		out.Spec.Delay = &d
	}
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy copies the run.
func (in *BaselineRun) DeepCopy() *BaselineRun {
	if in == nil {
		return nil
	}
	out := &BaselineRun{}
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *BaselineRun) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the status into out.
func (in *BaselineRunStatus) DeepCopyInto(out *BaselineRunStatus) {
	*out = *in
	if in.History != nil {
		out.History = make([]BaselineHandoff, len(in.History))
		for i := range in.History {
			in.History[i].DeepCopyInto(&out.History[i])
		}
	}
	if in.StartTime != nil {
		out.StartTime = in.StartTime.DeepCopy()
	}
	if in.CompletionTime != nil {
		out.CompletionTime = in.CompletionTime.DeepCopy()
	}
}

// DeepCopyInto copies the handoff into out.
func (in *BaselineHandoff) DeepCopyInto(out *BaselineHandoff) {
	*out = *in
	in.Time.DeepCopyInto(&out.Time)
}

// DeepCopyInto copies the list into out.
func (in *BaselineRunList) DeepCopyInto(out *BaselineRunList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]BaselineRun, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *BaselineRunList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &BaselineRunList{}
	in.DeepCopyInto(out)
	return out
}
