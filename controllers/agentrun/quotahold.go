package agentrun

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/controllers/agentquota"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/workflow"
)

// A started run whose next model call would pass a cost or token cap of its namespace is held
// (workflow.HoldAtQuota, one status write): its step stopped before the call, and goes on from
// its transcript once the namespace has room for that call. The run comes back at the cap's
// reset, whenever its namespace's AgentQuotas change, and every workflow.HeldRetry (calls in flight may
// settle for less than they reserved). Its status stays held until its step gets past the call:
// a run that finds room and loses it again to another run costs no write.

// roomForHeld says whether a run held at its namespace's cap may take its step again, and, if
// not, when to look again. A run that finds room remembers when (released).
func (r *Reconciler) roomForHeld(ctx context.Context, w *working, now time.Time) (workflow.Room, error) {
	if r.Ledger == nil {
		return workflow.Room{Free: true}, nil
	}
	call, known := r.Steps.HeldCall(w.AgentRun)
	if !known {
		// Held by an operator before a restart: the step tries its call, and is held again if
		// there is no room for it.
		call = quota.Call{Tokens: 1, Free: true}
	}
	caps, err := r.caps.Caps(ctx, r.Client, w.Namespace)
	if err != nil {
		return workflow.Room{}, err
	}
	v, err := r.Ledger.Room(ctx, w.Namespace, caps, call, now)
	if err != nil {
		return workflow.Room{}, err
	}
	if v.Outcome == quota.Held {
		return workflow.Room{Until: v.Until}, nil
	}
	log.FromContext(ctx).V(2).Info("A run held at its namespace's cap goes on", "agentRun", client.ObjectKeyFromObject(w))
	r.runs.release(w.AgentRun, now)
	return workflow.Room{Free: true}, nil
}

// quotasChanged maps a namespace's AgentQuota that changed (a cap raised, a quota deleted) to
// the runs it may free: those held at a cap, and the head of the line.
func (r *Reconciler) quotasChanged(ctx context.Context, o client.Object) []reconcile.Request {
	held, err := agentquota.Held(ctx, r.Client, o.GetNamespace())
	if err != nil {
		log.FromContext(ctx).Error(err, "Listing the runs held at a namespace's caps", "namespace", o.GetNamespace())
		return nil
	}
	var reqs []reconcile.Request
	for i := range held {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&held[i])})
	}
	run := &v1alpha1.AgentRun{}
	run.Namespace = o.GetNamespace()
	return append(reqs, r.queuedBehind(ctx, run)...)
}
