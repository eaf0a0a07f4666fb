package agentrun

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcript"
)

// What a finished run leaves behind goes away on its own: a run with ttlSecondsAfterFinished
// (its own, or its config's) is deleted that long after it ended, its branch runs with it (it
// controls them), and a deleted run's transcript is deleted by a sweep, keyed by run UID,
// without a finalizer write per run.

// +kubebuilder:rbac:groups=agents.baton.dev,resources=agentruns,verbs=delete

// expire deletes a finished run whose time to live has passed, with its transcript, or brings
// the run back when it will have.
func (r *Reconciler) expire(ctx context.Context, run *v1alpha1.AgentRun) (ctrl.Result, error) {
	if run.Spec.Branch != nil || run.Spec.Session != nil {
		// A branch run goes with its root, which controls it: a replay of the root reads it. A
		// turn goes with its session (ttlSecondsAfterIdle): the turns after it read it.
		return ctrl.Result{}, nil
	}
	ttl := run.Spec.TTLSecondsAfterFinished
	if ttl == nil && run.Status.ConfigRevision != "" {
		if spec, err := r.revisions.spec(ctx, run.Namespace, run.Status.ConfigRevision); err == nil {
			ttl = spec.TTLSecondsAfterFinished
		}
	}
	if ttl == nil || run.Status.CompletionTime == nil {
		return ctrl.Result{}, nil
	}
	left := run.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(r.Clock.Now())
	if left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	uid := run.UID
	if err := r.Delete(ctx, run, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(2).Info("Deleted a finished run past its ttlSecondsAfterFinished", "agentRun", klog.KObj(run), "ttl", *ttl)
	if err := r.Transcript.Delete(ctx, string(uid)); err != nil {
		// The sweep deletes it later.
		log.FromContext(ctx).Error(err, "Deleting a run's transcript", "agentRun", klog.KObj(run))
	}
	return ctrl.Result{}, nil
}

// NewSweep is the runnable that deletes, every so often (a minute when every is 0), the
// transcripts of runs that no longer exist. It runs on the leader.
func NewSweep(reader client.Reader, store transcript.Store, clk clock.PassiveClock, log logr.Logger, every time.Duration) manager.Runnable {
	if every <= 0 {
		every = time.Minute
	}
	return &transcriptSweep{reader: reader, store: store, clock: clk, log: log, every: every, grace: 2 * every}
}

// transcriptSweep deletes the transcripts of runs that no longer exist. It runs on the leader.
type transcriptSweep struct {
	reader client.Reader
	store  transcript.Store
	clock  clock.PassiveClock
	log    logr.Logger
	// every is how often it looks; grace is how long a transcript whose run is not in the cache
	// is kept, so that a run created since the cache was read is never taken for a deleted one.
	every, grace time.Duration
}

func (s *transcriptSweep) NeedLeaderElection() bool { return true }

// Start sweeps every s.every until ctx ends.
func (s *transcriptSweep) Start(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if n, err := s.sweep(ctx); err != nil {
				s.log.Error(err, "Sweeping the transcripts of deleted runs")
			} else if n > 0 {
				s.log.V(2).Info("Deleted the transcripts of deleted runs", "runs", n)
			}
		}
	}
}

// sweep deletes the transcripts of runs that are gone, and says how many.
func (s *transcriptSweep) sweep(ctx context.Context) (int, error) {
	held, err := s.store.Runs(ctx, "")
	if err != nil || len(held) == 0 {
		return 0, err
	}
	runs := &v1alpha1.AgentRunList{}
	// The cache's own objects, read only: copying every run would cost more than the sweep.
	if err := s.reader.List(ctx, runs, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	live := make(map[types.UID]bool, len(runs.Items))
	for i := range runs.Items {
		live[runs.Items[i].UID] = true
	}
	var gone []string
	cutoff := s.clock.Now().Add(-s.grace)
	for _, ref := range held {
		if !live[types.UID(ref.RunUID)] && ref.Last.Before(cutoff) {
			gone = append(gone, ref.RunUID)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	return len(gone), s.store.Delete(ctx, gone...)
}
