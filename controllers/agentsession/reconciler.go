// Package agentsession is the controller of AgentSessions: it makes each session the owner of
// its turns, writes where the conversation is (turns, last run, the state the next turn starts
// in, tokens and cost, phase) into the session's status when a turn starts or ends, ends the
// session by hand or at its limits, and deletes an idle session once its time to live has
// passed. What it decides is internal/sessions'. It also owns the cache index by which the
// AgentRun reconciler and it find a session's turns.
package agentsession

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/cost"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/sessions"
)

// Index is the name of the cache index of AgentRuns by the session they are a turn of.
const Index = "spec.session.name"

// SessionOf is Index's function.
func SessionOf(obj client.Object) []string {
	run, ok := obj.(*v1alpha1.AgentRun)
	if !ok || run.Spec.Session == nil {
		return nil
	}
	return []string{run.Spec.Session.Name}
}

// AddIndex adds Index to the manager's cache.
func AddIndex(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.AgentRun{}, Index, SessionOf)
}

// Reconciler keeps AgentSessions' status up to date.
type Reconciler struct {
	client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentsessions,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns,verbs=get;list;watch;patch;delete

// Reconcile gathers a session's turns, config and bounds, and writes what sessions.Next makes
// of them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &v1alpha1.AgentSession{}
	if err := r.Get(ctx, req.NamespacedName, s); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.orphans(ctx, req.NamespacedName)
	} else if err != nil || !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, err
	}
	f, err := r.facts(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := sessions.Next(f)
	if d.Delete {
		return ctrl.Result{}, r.expire(ctx, s, f.Turns)
	}
	if !equality.Semantic.DeepEqual(d.Status, s.Status) {
		patch := client.MergeFrom(s.DeepCopy())
		s.Status = d.Status
		if err := r.Status().Patch(ctx, s, patch); err != nil {
			return ctrl.Result{}, err
		}
		if d.Ended {
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "SessionEnded", "End", "%s: %s", d.Status.EndReason, d.Status.EndMessage)
		}
	}
	return ctrl.Result{RequeueAfter: d.After}, nil
}

// expire deletes an idle session past its time to live, then its turns (their transcripts go
// with them). The session goes only as it was read: a turn numbered since (the webhook wrote
// the session's status) makes the delete fail, and the session is looked at again with the new
// turn at work. The turns are deleted here, not left to the garbage collector: a control plane
// without one (a local one) deletes them too.
func (r *Reconciler) expire(ctx context.Context, s *v1alpha1.AgentSession, turns []sessions.Turn) error {
	err := r.Delete(ctx, s, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion})
	if apierrors.IsConflict(err) {
		return nil // changed since it was read: its update brings it back
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	for _, t := range turns {
		if err := r.deleteTurn(ctx, s.Namespace, t.Name, t.UID); err != nil {
			return fmt.Errorf("deleting turn %s of session %s: %w", t.Name, s.Name, err)
		}
	}
	return nil
}

// orphans deletes the turns owned by a session of that name that is gone: an operator that
// stopped between deleting an expired session and its turns finishes here.
func (r *Reconciler) orphans(ctx context.Context, key client.ObjectKey) error {
	runs := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, runs, client.InNamespace(key.Namespace), client.MatchingFields{Index: key.Name}); err != nil {
		return err
	}
	for i := range runs.Items {
		run := &runs.Items[i]
		for _, o := range run.OwnerReferences {
			if o.Kind == "AgentSession" && o.Name == key.Name && run.DeletionTimestamp.IsZero() {
				if err := r.deleteTurn(ctx, run.Namespace, run.Name, run.UID); err != nil {
					return fmt.Errorf("deleting turn %s of the deleted session %s: %w", run.Name, key.Name, err)
				}
				break
			}
		}
	}
	return nil
}

func (r *Reconciler) deleteTurn(ctx context.Context, namespace, name string, uid types.UID) error {
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	var opts []client.DeleteOption
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	return client.IgnoreNotFound(r.Delete(ctx, run, opts...))
}

// facts gathers the session's turns (making it their owner), whether its team is a
// StateMachine, and its limits under its namespace's runLimits.
func (r *Reconciler) facts(ctx context.Context, s *v1alpha1.AgentSession) (sessions.Facts, error) {
	f := sessions.Facts{Now: r.Clock.Now(), Session: s}
	runs := &v1alpha1.AgentRunList{}
	if err := r.List(ctx, runs, client.InNamespace(s.Namespace), client.MatchingFields{Index: s.Name}); err != nil {
		return f, err
	}
	for i := range runs.Items {
		run := &runs.Items[i]
		if err := r.own(ctx, s, run); err != nil {
			return f, err
		}
		f.Turns = append(f.Turns, TurnOf(run))
	}
	cfg := &v1alpha1.AgentConfig{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.ConfigRef.Name}, cfg)
	if err != nil && !apierrors.IsNotFound(err) {
		return f, err
	}
	f.StateMachine = err == nil && cfg.Spec.Mode == v1alpha1.ModeStateMachine
	quotas := &v1alpha1.AgentQuotaList{}
	if err := r.List(ctx, quotas, client.InNamespace(s.Namespace)); err != nil {
		return f, err
	}
	f.Limits = sessions.Bounded(s.Spec.Limits, quota.CapsOf(quotas.Items).Runs)
	return f, nil
}

// own makes the session an owner of its turn, so that the turn goes with the session. It does
// not block the session's deletion, and is not the turn's controller.
func (r *Reconciler) own(ctx context.Context, s *v1alpha1.AgentSession, run *v1alpha1.AgentRun) error {
	for _, o := range run.OwnerReferences {
		if o.UID == s.UID {
			return nil
		}
	}
	patch := client.MergeFromWithOptions(run.DeepCopy(), client.MergeFromWithOptimisticLock{})
	run.OwnerReferences = append(run.OwnerReferences, metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentSession", Name: s.Name, UID: s.UID,
		BlockOwnerDeletion: ptr.To(false),
	})
	if err := r.Patch(ctx, run, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("making session %s the owner of its turn %s: %w", s.Name, run.Name, err)
	}
	return nil
}

// TurnOf is what the session's status is made of, of one turn.
func TurnOf(run *v1alpha1.AgentRun) sessions.Turn {
	t := sessions.Turn{Name: run.Name, UID: run.UID, Number: v1alpha1.TurnNumber(run), Created: run.CreationTimestamp.Time,
		Phase: run.Status.Phase, Tokens: run.Status.TokensUsed, Cost: cost.Amount(run.Status.Cost), State: run.Status.State,
		Started: run.Status.StartTime != nil, Taint: run.Status.Taint}
	if run.Status.CompletionTime != nil {
		t.Ended = run.Status.CompletionTime.Time
	}
	return t
}

// SetupWithManager registers the controller: a session is looked at when it changes and when
// one of its turns starts or ends.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.AgentSession{}).
		Watches(&v1alpha1.AgentRun{}, handler.EnqueueRequestsFromMapFunc(sessionOfTurn),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: phaseChanged})).
		Complete(r)
}

// sessionOfTurn maps a turn to its session.
func sessionOfTurn(_ context.Context, obj client.Object) []reconcile.Request {
	names := SessionOf(obj)
	if len(names) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: names[0]}}}
}

// phaseChanged passes the updates of a turn that change its phase: a turn's steps do not
// change its session until the turn ends.
func phaseChanged(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1alpha1.AgentRun)
	n, ok2 := e.ObjectNew.(*v1alpha1.AgentRun)
	return ok1 && ok2 && n.Spec.Session != nil && o.Status.Phase != n.Status.Phase
}
