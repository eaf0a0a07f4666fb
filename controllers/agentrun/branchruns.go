package agentrun

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/workflow"
)

// Which run is a branch's (docs/design/parallel-branches.md, "Only the operator makes
// branches"). The join and the cancel take for a branch only the run the operator made for it:
// the run of the UID the parent's status lists. The status that names a branch is written before
// its run is made, and the UID goes in with the parent's next status write; until then the
// branch's run is the one this process made (runState.made) or, after a restart, one only the
// operator can have made (workflow.NotBranch): a run of the operator's own creator as the
// admission webhook records it, which nobody else can have while the webhook is trusted; while
// it is not, nothing is taken on a creator's word. Any other run that holds a branch's name is
// never adopted, joined or cancelled: the parent fails BranchFailed, naming it.

// cacheLag bounds how long a branch run this process made is taken as made while the cache does
// not show it: past it, the API server says whether it is still there.
const cacheLag = 10 * time.Second

// branchRuns is what the join reads of the branches the run's status lists, by name: each
// branch's own run, from the cache with the status this process handed to the writer for it
// (asHeld), or as made when this process made it a moment ago and the cache does not show it
// yet, or why another run holds its name or its run is gone. A branch not in it has no run yet
// (makeBranches makes it).
func (r *Reconciler) branchRuns(ctx context.Context, w *working) (map[string]workflow.BranchRun, error) {
	list, err := r.labelledBranches(ctx, w.AgentRun, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*v1alpha1.AgentRun, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	out := make(map[string]workflow.BranchRun, len(w.Status.Branches))
	for i, b := range w.Status.Branches {
		run := byName[b.Name]
		made, ok := r.runs.madeRun(w.AgentRun, b.Name)
		switch {
		case !ok:
		case run == nil && !made.seen && r.Clock.Since(made.at) < cacheLag && (b.UID == "" || b.UID == string(made.uid)):
			// Made by this process a moment ago, and not in the cache yet: as it was made.
			out[b.Name] = workflow.BranchRun{Found: true, UID: string(made.uid)}
			continue
		case run != nil && run.UID == made.uid:
			r.runs.seenBranch(w.AgentRun, b.Name)
		}
		if b.UID != "" && (run == nil || string(run.UID) != b.UID) {
			// The run made for it is not in the cache under its UID: made a moment ago, gone,
			// or its name taken since. The API server says which.
			if run, err = r.fresh(ctx, w.Namespace, b.Name); err != nil {
				return nil, err
			}
			if run == nil {
				out[b.Name] = workflow.BranchRun{Taken: fmt.Sprintf("the run Baton made for it (uid %s) was deleted", b.UID)}
				continue
			}
		}
		if run != nil {
			out[b.Name] = r.asBranchRun(ctx, w.AgentRun, i, r.runs.asHeld(run))
		}
	}
	return out, nil
}

// wakeParent brings the run's parent back at once when the run, a branch, ended: its end is in
// the transcript and handed to the writer, and the join reads it from there (asHeld) rather
// than wait for the write and its watch event.
func (r *Reconciler) wakeParent(ctx context.Context, run *v1alpha1.AgentRun) {
	owner := metav1.GetControllerOf(run)
	if owner == nil || owner.Kind != "AgentRun" || owner.APIVersion != v1alpha1.GroupVersion.String() {
		return
	}
	r.writer.wakeAfter(ctx, types.NamespacedName{Namespace: run.Namespace, Name: owner.Name}, 0)
}

// asBranchRun is what the join reads of run, which holds the name of the parent's branch i:
// the run's end and use when it is the branch's, else why it is in the way.
func (r *Reconciler) asBranchRun(ctx context.Context, parent *v1alpha1.AgentRun, i int, run *v1alpha1.AgentRun) workflow.BranchRun {
	if why := r.notBranch(ctx, parent, i, run); why != "" {
		return workflow.BranchRun{Taken: why}
	}
	st := &run.Status
	return workflow.BranchRun{Found: true, UID: string(run.UID), Phase: st.Phase, Reason: st.TerminationReason,
		Message: st.TerminationMessage, Output: st.Output, Tokens: st.TokensUsed, Cost: st.Cost, ToolCalls: st.ToolCalls,
		Steps: st.StepCount + st.BranchSteps, Handoffs: st.HandoffCount, Taint: st.Taint}
}

// notBranch says why run, which holds the name of the parent's branch i, is not that branch's
// run, if it is not (workflow.NotBranch). The operator's own creator is asked of the webhook's
// trust only when nothing else can tell.
func (r *Reconciler) notBranch(ctx context.Context, parent *v1alpha1.AgentRun, i int, run *v1alpha1.AgentRun) string {
	made := r.runs.madeUID(parent, run.Name)
	operator := ""
	if parent.Status.Branches[i].UID == "" && made == "" {
		if trusted, self := r.Trust.Operator(ctx); trusted {
			operator = self
		}
	}
	return workflow.NotBranch(run, parent, i, made, operator)
}

// fresh is the named run as the API server has it, past the cache; nil when there is none.
func (r *Reconciler) fresh(ctx context.Context, namespace, name string) (*v1alpha1.AgentRun, error) {
	run := &v1alpha1.AgentRun{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, run)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading agentrun %s: %w", name, err)
	}
	return run, nil
}

// heldNames adds to runs what holds the names of the branches missing (by place) that no run
// labelled as a branch does: a run written with a branch's name before the fan-out, labelled
// or not. The cache has every run of the namespace.
func (r *Reconciler) heldNames(ctx context.Context, parent *v1alpha1.AgentRun, missing []int, runs map[string]workflow.BranchRun) error {
	for _, i := range missing {
		name := parent.Status.Branches[i].Name
		held := &v1alpha1.AgentRun{}
		err := r.Get(ctx, client.ObjectKey{Namespace: parent.Namespace, Name: name}, held)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return err
		}
		runs[name] = r.asBranchRun(ctx, parent, i, held)
	}
	return nil
}

// cancelBranches cancels the parent's branches of those names that are not ended, as a person
// would, by their cancel annotation: each only if the run that holds its name is the branch's
// own. The patch carries the run's UID, so that a run made under the name since it was read
// is refused by the API server rather than cancelled.
func (r *Reconciler) cancelBranches(ctx context.Context, parent *v1alpha1.AgentRun, names []string, why string) error {
	for _, name := range names {
		i, listed := workflow.ListedBranch(&parent.Status, name)
		if !listed {
			continue
		}
		b := &v1alpha1.AgentRun{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: parent.Namespace, Name: name}, b); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if b.Status.Phase.Terminal() {
			continue
		}
		if _, ok := b.Annotations[v1alpha1.AnnotationCancel]; ok {
			continue
		}
		if notOurs := r.notBranch(ctx, parent, i, b); notOurs != "" {
			log.FromContext(ctx).V(2).Info("Not cancelling a run that is not the branch's", "agentRun", klog.KObj(parent),
				"branch", name, "why", notOurs)
			continue
		}
		if err := client.IgnoreNotFound(r.Patch(ctx, b, cancelPatch(b.UID, why))); err != nil {
			return fmt.Errorf("cancelling branch %s: %w", name, err)
		}
	}
	return nil
}

// cancelPatch is the merge patch that cancels the run of that UID, and no other.
func cancelPatch(uid types.UID, why string) client.Patch {
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": map[string]string{v1alpha1.AnnotationCancel: why},
	}})
	return client.RawPatch(types.MergePatchType, data)
}
