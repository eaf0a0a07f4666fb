// Package notifier sends runs' notifications to the sinks of their configs' spec.notify. It
// derives each run's events from its status as the manager's cache sees it change
// (notify.Changes), and from the time a gate has waited (notify.Due), writes them to the outbox
// before anything is sent, and delivers the outbox's due entries, in order per run and sink,
// through the egress policy, signed when the sink has a key, trying again as notify.NextTry
// says. Nothing is written to a run: what each sink was sent is counted on its AgentConfig's
// status and in metrics. It runs on the elected leader, off every reconcile's path.
package notifier

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/agents"
	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/notify"
	"github.com/baton-dev/baton/internal/outbox"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/runview"
	"github.com/baton-dev/baton/internal/transcript"
)

// Defaults of the Notifier's periods and bounds.
const (
	DefaultWorkers  = 16
	deliverEvery    = time.Second
	remindEvery     = 15 * time.Second
	flushEvery      = 10 * time.Second
	purgeEvery      = time.Hour
	sendTimeout     = 10 * time.Second
	dueBatch        = 256
	derivedQueueLen = 1024
)

// Notifier derives, stores and delivers notifications.
type Notifier struct {
	// Client reads AgentConfigs and AgentRuns from the manager's cache and writes configs'
	// status; Cache is where it watches runs change.
	Client client.Client
	Cache  cache.Cache
	Outbox outbox.Store
	// Transcript gives what waits at a gate: the output of the step before it, whole.
	Transcript transcript.Store
	// Secrets reads sinks' URLs and signing keys from labelled Secrets.
	Secrets agents.SecretReader
	// HTTP posts to sinks: the egress policy's client.
	HTTP *http.Client
	// Console is the console's URL (--console-url); events link to gates there.
	Console string
	Clock   clock.Clock
	Log     logr.Logger
	// Workers bounds the deliveries made at once (default DefaultWorkers).
	Workers int

	derived chan derivation
	// wake wakes the delivery, opened the reminders (a gate opened).
	wake, opened chan struct{}
	mu           sync.Mutex
	// inFlight are the entries being delivered; counts are what sinks were sent since the
	// last flush of their configs' status.
	inFlight map[int64]bool
	finished map[int64]bool
	counts   map[sinkKey]*sinkCounts
}

// NeedLeaderElection makes the notifier run on the elected leader alone.
func (n *Notifier) NeedLeaderElection() bool { return true }

// derivation is a run's change to derive events from.
type derivation struct {
	before *v1alpha1.AgentRunStatus
	run    *v1alpha1.AgentRun
}

// Start watches runs, and delivers until ctx ends.
func (n *Notifier) Start(ctx context.Context) error {
	n.init()
	informer, err := n.Cache.GetInformer(ctx, &v1alpha1.AgentRun{})
	if err != nil {
		return err
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if run, ok := obj.(*v1alpha1.AgentRun); ok {
				n.queue(ctx, nil, run)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1alpha1.AgentRun)
			run, ok2 := newObj.(*v1alpha1.AgentRun)
			if ok1 && ok2 && old.ResourceVersion != run.ResourceVersion && notify.Relevant(&old.Status, &run.Status) {
				n.queue(ctx, &old.Status, run)
			}
		},
	})
	if err != nil {
		return err
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()
	var wg sync.WaitGroup
	flushLoop := func(ctx context.Context) { wait.UntilWithContext(ctx, n.flush, flushEvery) }
	purgeLoop := func(ctx context.Context) { wait.UntilWithContext(ctx, n.purge, purgeEvery) }
	for _, loop := range []func(context.Context){n.deriveLoop, n.deliverLoop, n.remindLoop, flushLoop, purgeLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (n *Notifier) init() {
	n.derived, n.wake, n.opened = make(chan derivation, derivedQueueLen), make(chan struct{}, 1), make(chan struct{}, 1)
	n.inFlight, n.finished, n.counts = map[int64]bool{}, map[int64]bool{}, map[sinkKey]*sinkCounts{}
}

// queue hands a run's change to the loop that derives its events; the informer's handler does
// no more than that.
func (n *Notifier) queue(ctx context.Context, before *v1alpha1.AgentRunStatus, run *v1alpha1.AgentRun) {
	select {
	case n.derived <- derivation{before: before, run: run}:
	case <-ctx.Done():
	}
}

func (n *Notifier) deriveLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-n.derived:
			n.derive(ctx, d.before, d.run)
		}
	}
}

// derive writes the events of a run's change to the outbox, if its config has sinks.
func (n *Notifier) derive(ctx context.Context, before *v1alpha1.AgentRunStatus, run *v1alpha1.AgentRun) {
	cfg, ok := n.config(ctx, run.Namespace, run.Spec.ConfigRef.Name)
	if !ok {
		return
	}
	events := notify.Changes(n.facts(cfg, before, run))
	if err := n.put(ctx, cfg, run, events); err != nil {
		n.Log.Error(err, "Writing notifications to the outbox", "agentRun", run.Namespace+"/"+run.Name)
	}
	for _, e := range events {
		if e.Type == v1alpha1.NotifyGateOpened {
			select {
			case n.opened <- struct{}{}:
			default:
			}
		}
	}
}

// config is the run's config when it has sinks.
func (n *Notifier) config(ctx context.Context, namespace, name string) (*v1alpha1.AgentConfig, bool) {
	cfg := &v1alpha1.AgentConfig{}
	if err := n.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cfg); err != nil || len(cfg.Spec.Notify) == 0 {
		return nil, false
	}
	return cfg, true
}

func (n *Notifier) facts(cfg *v1alpha1.AgentConfig, before *v1alpha1.AgentRunStatus, run *v1alpha1.AgentRun) notify.Facts {
	return notify.Facts{Namespace: run.Namespace, Run: run.Name, UID: string(run.UID), Config: cfg.Name, Before: before,
		After: run.Status, Gates: gatesOf(cfg, run), Now: n.Clock.Now(), Console: n.Console}
}

// gatesOf are the gates of the run's config, and the tool's gate or taint gate it waits at, if
// it does: their reminders and escalation are the agent's tools entry's.
func gatesOf(cfg *v1alpha1.AgentConfig, run *v1alpha1.AgentRun) []v1alpha1.ApprovalGate {
	p := run.Status.PendingApproval
	if p == nil || p.ToolCall == nil {
		return cfg.Spec.Approvals
	}
	g := runview.GateSpec(cfg, run.Status.CurrentAgent, p.Gate)
	if g == nil {
		return cfg.Spec.Approvals
	}
	return append(slices.Clip(cfg.Spec.Approvals), *g)
}

// put writes each event for each sink that wants it, with what waits at its gate read from
// the transcript, and wakes the delivery.
func (n *Notifier) put(ctx context.Context, cfg *v1alpha1.AgentConfig, run *v1alpha1.AgentRun, events []notify.Event) error {
	var entries []outbox.Entry
	for _, e := range events {
		if e.Gate != "" && e.Waiting == nil && e.Type != v1alpha1.NotifyGateDecided {
			e.Waiting = n.waiting(ctx, run)
		}
		body, err := json.Marshal(e)
		if err != nil {
			return err
		}
		for i := range cfg.Spec.Notify {
			s := &cfg.Spec.Notify[i]
			if s.Wants(e.Type) {
				entries = append(entries, outbox.Entry{Namespace: run.Namespace, Config: cfg.Name, Sink: s.Name, RunUID: string(run.UID),
					EventID: e.ID, Body: body, Written: e.Time, NextTry: e.Time})
			}
		}
	}
	stored, err := n.Outbox.Put(ctx, entries...)
	if err == nil && stored > 0 {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
	return err
}

// waiting is the output of the run's last step, whole up to notify.MaxWaiting, from its
// transcript; nil when it cannot be read.
func (n *Notifier) waiting(ctx context.Context, run *v1alpha1.AgentRun) *notify.Waiting {
	out, found, err := records.LastOutput(ctx, n.Transcript, string(run.UID))
	if err != nil || !found {
		return nil
	}
	return notify.WaitingOutput(out)
}

// remindLoop derives the reminders and escalations due of the runs that wait at gates: when
// the earliest of them comes due, at most remindEvery apart, and when a gate opens.
func (n *Notifier) remindLoop(ctx context.Context) {
	for {
		wait := remindEvery
		if next := n.remind(ctx); !next.IsZero() {
			// At most once a second: each look lists the runs from the cache.
			wait = min(max(next.Sub(n.Clock.Now()), time.Second), remindEvery)
		}
		t := n.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-n.opened:
			t.Stop()
		}
	}
}

// remind writes the reminders and escalations due now, and says when the next is due.
func (n *Notifier) remind(ctx context.Context) time.Time {
	runs := &v1alpha1.AgentRunList{}
	if err := n.Client.List(ctx, runs); err != nil {
		n.Log.Error(err, "Listing runs for reminders")
		return time.Time{}
	}
	var earliest time.Time
	for i := range runs.Items {
		run := &runs.Items[i]
		if run.Status.Phase != v1alpha1.PhaseAwaitingApproval {
			continue
		}
		cfg, ok := n.config(ctx, run.Namespace, run.Spec.ConfigRef.Name)
		if !ok {
			continue
		}
		events, next := notify.Due(n.facts(cfg, nil, run))
		if !next.IsZero() && (earliest.IsZero() || next.Before(earliest)) {
			earliest = next
		}
		if len(events) > 0 {
			if err := n.put(ctx, cfg, run, events); err != nil {
				n.Log.Error(err, "Writing reminders to the outbox", "agentRun", run.Namespace+"/"+run.Name)
			}
		}
	}
	return earliest
}

// purge drops the entries delivered or given up more than outbox.Keep ago.
func (n *Notifier) purge(ctx context.Context) {
	if err := n.Outbox.Purge(ctx, n.Clock.Now().Add(-outbox.Keep)); err != nil {
		n.Log.Error(err, "Purging the outbox")
	}
}
