package agentrun

import (
	"context"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/decisions"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/textbound"
	"github.com/baton-dev/baton/internal/workflow"
)

// rawDecision finds a decision annotation the admission webhook did not take (it is not
// installed): the annotations without it, and the decision, whose maker is unknown.
func rawDecision(run *v1alpha1.AgentRun, now time.Time) (map[string]string, decisions.Queued, bool) {
	annotations := maps.Clone(run.Annotations)
	d, ok := decisions.Take(annotations, "", metav1.NewTime(now))
	return annotations, d, ok
}

// intake moves a decision annotation into the run's queue of decisions, as the webhook would
// have: one update, guarded by the resourceVersion it was read at. Its watch event brings the
// run back to apply the decision.
func (r *Reconciler) intake(ctx context.Context, run *v1alpha1.AgentRun, annotations map[string]string, d decisions.Queued) error {
	// A full queue drops the decision, with an Event; its annotations go either way.
	queued, err := decisions.Add(annotations, d, run.Status.LastDecision)
	if err != nil {
		r.Recorder.Eventf(run, nil, workflow.EventWarning, workflow.EventDecisionIgnored, "Intake", "%s", textbound.BytesMarked(err.Error(), maxEventNote))
	}
	orig := run.DeepCopy()
	run.Annotations = queued
	if err := r.Patch(ctx, run, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	metrics.APIWrites.WithLabelValues("intake").Inc()
	return nil
}

// pendingDecisions are the queued decisions the run has not taken yet, oldest first. When the
// queue is not guarded by the webhook, who decided is unverified.
func pendingDecisions(ctx context.Context, run *v1alpha1.AgentRun, trusted bool) []decisions.Queued {
	queue, err := decisions.Read(run.Annotations)
	if err != nil {
		log.FromContext(ctx).Error(err, "Ignoring an unreadable decision queue", "agentRun", klog.KObj(run))
		return nil
	}
	var out []decisions.Queued
	for _, q := range queue {
		if q.Seq > run.Status.LastDecision {
			if !trusted {
				q.By = v1alpha1.ByUnverified
			}
			out = append(out, q)
		}
	}
	return out
}

// forRun is the plan for the run. Its creator is who created it, as the admission webhook
// recorded it; unknown (empty) when the webhook did not record it, or does not guard the
// annotation, since anyone who may patch the run could have written it then.
//
// A branch's creator is its root run's, whose work it does: who created the root run may not
// approve at the branch's gates either. A branch runs as its spec.branch says.
func (r *Reconciler) forRun(ctx context.Context, plan *workflow.Plan, run *v1alpha1.AgentRun) *workflow.Plan {
	plan = plan.ForRun(run.Name, run.Namespace, run.Spec.Approvals, r.creatorOf(ctx, run))
	if b := run.Spec.Branch; b != nil {
		plan = plan.AsBranch(b.Agent, b.Depth)
	}
	return plan
}

// creatorOf is who created the run, or the root run of a branch, as the admission webhook
// recorded it, when it is trusted; empty when it is not known. A branch whose tree cannot be
// walked to its root has no known creator: never its own created-by, which is the operator's,
// so that its gates that forbid self-approval refuse every approval rather than let the root
// run's creator approve.
func (r *Reconciler) creatorOf(ctx context.Context, run *v1alpha1.AgentRun) string {
	if !r.Trust.Trusted(ctx) {
		return ""
	}
	root, why := r.rootOf(ctx, run)
	if root == nil {
		log.FromContext(ctx).V(2).Info("The branch's creator is unknown", "agentRun", klog.KObj(run), "why", why)
		return ""
	}
	return root.Annotations[v1alpha1.AnnotationCreatedBy]
}

// rootOf is the run whose branches' branches the run is: the run itself when it is no branch.
// Each step up is to the parent the branch names, and only while that run controls it: a
// parent gone, or another run since made under its name, or nesting past the deepest, leaves
// no root (nil), and why.
func (r *Reconciler) rootOf(ctx context.Context, run *v1alpha1.AgentRun) (*v1alpha1.AgentRun, string) {
	for range v1alpha1.MaxDepth + 1 {
		if run.Spec.Branch == nil {
			return run, ""
		}
		parent := &v1alpha1.AgentRun{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Spec.Branch.Parent}, parent); err != nil {
			return nil, fmt.Sprintf("the parent %s of run %s cannot be read: %v", run.Spec.Branch.Parent, run.Name, err)
		}
		if !workflow.ControlledBy(run, parent) {
			return nil, fmt.Sprintf("run %s is not controlled by the run %s it names as its parent", run.Name, parent.Name)
		}
		run = parent
	}
	return nil, fmt.Sprintf("branches nested deeper than %d", v1alpha1.MaxDepth)
}
