package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
	"github.com/baton-dev/baton/internal/workflow"
)

// A run whose step fanned out waits for its branches (workflow.Branching): each is a child
// AgentRun that the run controls, labelled with its parent (docs/design/parallel-branches.md).
// The fan-out's status write names them first; then the branch runs are made, from the fan-out
// step's record in the transcript, so that a restart between the two makes them then, and never
// twice; their UIDs go into the run's status with its next write, and from then on only the
// runs of those UIDs are its branches' (branchruns.go). A branch's name held by a run the
// operator did not make for it fails the run instead. The branches' ends bring the run back
// (an owner watch of their phases); the core decides the join from them, read from the cache;
// the branches no longer needed are cancelled once the join is written. A run that ends
// cancels the branches still running.

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns,verbs=create

// labelledBranches are the runs of the run's namespace labelled as its branches, from the
// cache; who controls them is for the caller to check.
func (r *Reconciler) labelledBranches(ctx context.Context, run *v1alpha1.AgentRun, opts ...client.ListOption) (*v1alpha1.AgentRunList, error) {
	list := &v1alpha1.AgentRunList{}
	opts = append(opts, client.InNamespace(run.Namespace), client.MatchingLabels{v1alpha1.LabelParent: workflow.ParentLabel(run.Name)})
	return list, r.List(ctx, list, opts...)
}

// branchesToMake is the places of the branches the run's status names that have no run yet,
// after what holds their names is added to runs (heldNames, from the cache): none when a run
// holds a branch's name already, which makes the run fail (the join says so), and none is made
// then.
func (r *Reconciler) branchesToMake(ctx context.Context, w *working, runs map[string]workflow.BranchRun) ([]int, error) {
	var missing []int
	for i, b := range w.Status.Branches {
		if _, ok := runs[b.Name]; !ok && b.UID == "" {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if err := r.heldNames(ctx, w.AgentRun, missing, runs); err != nil {
		return nil, err
	}
	for _, b := range runs {
		if b.Taken != "" {
			return nil, nil
		}
	}
	return missing, nil
}

// makeBranchesOff makes the run's missing branch runs (makeBranches) in a goroutine of its own,
// a few runs' at once, so that a fan-out's creates hold no reconcile worker; the run waits, and
// is woken once they are made. A run whose branches are being made makes none again.
func (r *Reconciler) makeBranchesOff(ctx context.Context, w *working, plan *workflow.Plan, runs map[string]workflow.BranchRun, missing []int) {
	if !r.runs.startCreating(w.AgentRun) {
		return
	}
	key := client.ObjectKeyFromObject(w.AgentRun)
	copied := &working{AgentRun: w.DeepCopy()}
	found := maps.Clone(runs)
	go func() {
		r.creators <- struct{}{}
		defer func() { <-r.creators }()
		if err := r.makeBranches(ctx, copied, plan, found, missing); err != nil {
			log.FromContext(ctx).Error(err, "Making branch runs", "agentRun", key)
		}
		r.runs.doneCreating(copied.AgentRun)
		r.writer.wakeAfter(ctx, key, 0)
	}()
}

// makeBranches makes the branch runs of the places missing (branchesToMake), with their inputs
// from the fan-out step's record and their shares of the run's limits, and adds them to runs. A
// run made meanwhile under a branch's name (by this operator before a restart) is the branch's
// only if nobody else can have made it (asBranchRun).
func (r *Reconciler) makeBranches(ctx context.Context, w *working, plan *workflow.Plan, runs map[string]workflow.BranchRun, missing []int) error {
	st := &w.Status
	step := st.HandoffSequence[len(st.HandoffSequence)-1].Step
	branches, err := r.fanOut(ctx, w.AgentRun, step)
	if err != nil {
		return err
	}
	shares := workflow.Shares(plan, st)
	for _, i := range missing {
		b := st.Branches[i]
		if _, ok := runs[b.Name]; ok {
			continue
		}
		if i >= len(branches) || branches[i].Agent != b.Agent || workflow.InputDigest(branches[i].Input) != b.InputDigest {
			return fmt.Errorf("the record of step %d does not hold branch %s as the run's status names it", step, b.Name)
		}
		child := branchRun(w.AgentRun, b, branches[i].Input, shares[i], step, int32(i+1), workflow.Depth(w.AgentRun)+1)
		err := r.Create(ctx, child)
		switch {
		case apierrors.IsAlreadyExists(err):
			// Made since the cache was read: by whom, the API server's copy says. Gone again,
			// it is made on the next reconcile.
			held, readErr := r.fresh(ctx, w.Namespace, b.Name)
			if held != nil {
				runs[b.Name] = r.asBranchRun(ctx, w.AgentRun, i, held)
			}
			if readErr != nil {
				return readErr
			}
			continue
		case err != nil:
			return fmt.Errorf("making branch %s: %w", b.Name, err)
		}
		r.runs.madeBranch(w.AgentRun, b.Name, child.UID, r.Clock.Now())
		runs[b.Name] = workflow.BranchRun{Found: true, UID: string(child.UID)}
		log.FromContext(ctx).V(2).Info("Made a branch", "agentRun", klog.KObj(w), "branch", b.Name, "agent", b.Agent, "uid", child.UID)
	}
	return nil
}

// fanOut reads the branches the run's step asked for from the step's record.
func (r *Reconciler) fanOut(ctx context.Context, run *v1alpha1.AgentRun, step int32) ([]workflow.Branch, error) {
	rec, ok, err := r.Transcript.Get(ctx, string(run.UID), transcript.Key{Kind: transcript.KindStep, Step: step})
	if err != nil {
		return nil, err
	}
	var body records.StepBody
	if !ok || json.Unmarshal(rec.Body, &body) != nil {
		return nil, fmt.Errorf("the record of step %d, which fanned out, cannot be read", step)
	}
	return body.Parallel, nil
}

// branchRun is the AgentRun of one branch: controlled by its parent (so that it goes when the
// parent goes), labelled with it, on the parent's config from the branch's agent, with its share
// of the parent's limits and the parent's approvals.
func branchRun(parent *v1alpha1.AgentRun, b v1alpha1.BranchStatus, input string, share v1alpha1.LimitOverrides, step, index, depth int32) *v1alpha1.AgentRun {
	controller := true
	run := &v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{
			Name:      b.Name,
			Namespace: parent.Namespace,
			Labels:    map[string]string{v1alpha1.LabelParent: workflow.ParentLabel(parent.Name)},
			// Without blockOwnerDeletion: the operator needs no update of agentruns/finalizers.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun",
				Name: parent.Name, UID: parent.UID, Controller: &controller,
			}},
		},
		Spec: v1alpha1.AgentRunSpec{
			ConfigRef: parent.Spec.ConfigRef,
			Input:     input,
			Limits:    &share,
			Approvals: parent.Spec.Approvals,
			Branch:    &v1alpha1.RunBranch{Parent: parent.Name, Step: step, Index: index, Agent: b.Agent, Depth: depth},
		},
	}
	return run
}

// branchStartFacts gathers what a branch run's start depends on: its parent must vouch for it
// (it controls the run and names it as its fan-out's branch), and the branch starts on the
// parent's pinned config, admitted with its parent.
func (r *Reconciler) branchStartFacts(ctx context.Context, w *working) (workflow.StartFacts, error) {
	run := w.AgentRun
	parent := &v1alpha1.AgentRun{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.Branch.Parent}, parent)
	if apierrors.IsNotFound(err) {
		return workflow.StartFacts{Problem: fmt.Sprintf("spec.branch: the parent run %s does not exist", run.Spec.Branch.Parent)}, nil
	}
	if err != nil {
		return workflow.StartFacts{}, err
	}
	// The parent's fan-out was written just before the branch was made: the cache may not
	// have it yet, this operator's written copy does, and the API server has it.
	parent = r.runs.latest(parent)
	problem, err := r.vouch(ctx, run, parent)
	if err == nil && problem != "" {
		fresh := &v1alpha1.AgentRun{}
		if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(parent), fresh); err == nil {
			problem, err = r.vouch(ctx, run, fresh)
			parent = fresh
		}
	}
	if err != nil {
		return workflow.StartFacts{}, err
	}
	if problem != "" {
		return workflow.StartFacts{Problem: "spec.branch: " + problem}, nil
	}
	revision := parent.Status.ConfigRevision
	plan, err := r.pinnedPlan(ctx, withRevision(run, revision))
	if err != nil {
		return workflow.StartFacts{Problem: err.Error()}, nil
	}
	w.start.plan, w.start.revision = plan, revision
	w.start.taint = workflow.Inherited(parent.Status.Taint, "parent run "+parent.Name)
	return workflow.StartFacts{Pinned: true}, nil
}

// vouch says why the parent does not vouch for the run as its branch, if it does not.
func (r *Reconciler) vouch(ctx context.Context, run, parent *v1alpha1.AgentRun) (string, error) {
	parentPlan, err := r.pinnedPlan(ctx, parent)
	if err != nil {
		if errors.Is(err, errRevisionGone) || errors.Is(err, errPlanInvalid) {
			return fmt.Sprintf("the parent run's config cannot run: %v", err), nil
		}
		return "", err
	}
	return workflow.CheckBranch(run, parent, parentPlan), nil
}

// withRevision is the run as it will be once it pinned the revision: what pinnedPlan reads.
func withRevision(run *v1alpha1.AgentRun, revision string) *v1alpha1.AgentRun {
	pinned := *run
	pinned.Status.ConfigRevision = revision
	return &pinned
}

// branchPhaseChanged passes the updates of a branch run that change its phase: the ones its
// parent's join reads. A branch's steps between them cost its parent nothing.
func branchPhaseChanged(e event.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*v1alpha1.AgentRun)
	cur, ok2 := e.ObjectNew.(*v1alpha1.AgentRun)
	return !ok1 || !ok2 || old.Status.Phase != cur.Status.Phase
}
