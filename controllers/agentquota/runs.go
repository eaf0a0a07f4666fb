package agentquota

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/quota"
	"github.com/baton-dev/baton/internal/workflow"
)

// Indexes of the runs by what quotas count, so that what a namespace uses is read from the
// cache without going through its ended runs.
const (
	// stateIndex holds "active" for runs that count against maxRunningRuns (and "held" too for
	// those held at a cost or token cap) and "queued" for runs waiting in line; other runs are
	// not in it.
	stateIndex = "baton.quota"
	// dayIndex holds the UTC day a run started, for the day's cost and tokens.
	dayIndex = "baton.startDay"
)

// Index adds the indexes the quotas read to the manager's cache.
func Index(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.AgentRun{}, stateIndex, stateOf); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &v1alpha1.AgentRun{}, dayIndex, startDay)
}

// A branch run counts in no quota: its parent, admitted once, counts for it, and the parent's
// counts include its branches' use once they join.

func stateOf(o client.Object) []string {
	run, ok := o.(*v1alpha1.AgentRun)
	switch {
	case !ok || run.Spec.Branch != nil:
		return nil
	case quota.Active(run.Status.Phase) && run.Status.QuotaHold != nil:
		return []string{"active", "held"}
	case quota.Active(run.Status.Phase):
		return []string{"active"}
	case run.Status.Phase == v1alpha1.PhaseQueued && !awaitingKueue(run):
		return []string{"queued"}
	}
	return nil
}

// awaitingKueue reports whether a Queued run waits for Kueue, not for its quotas: it is in no
// quota's line, so that it holds back none of the runs behind it.
func awaitingKueue(run *v1alpha1.AgentRun) bool {
	reason, _ := workflow.QueuedFor(&run.Status)
	return reason == v1alpha1.ReasonAwaitingAdmission
}

func startDay(o client.Object) []string {
	run, ok := o.(*v1alpha1.AgentRun)
	if !ok || run.Status.StartTime == nil || run.Spec.Branch != nil {
		return nil
	}
	return []string{dayOf(run.Status.StartTime.Time)}
}

func dayOf(t time.Time) string { return quota.DayStart(t).Format(time.DateOnly) }

// Counted lists a namespace's runs that quotas count (at work, in line, started today), once
// each, and the line. The runs are the cache's own: read them, never change them.
func Counted(ctx context.Context, c client.Reader, namespace string, now time.Time) ([]v1alpha1.AgentRun, []quota.Waiting, error) {
	var counted []v1alpha1.AgentRun
	seen := map[string]bool{}
	var line []quota.Waiting
	for _, sel := range []client.MatchingFields{{stateIndex: "active"}, {stateIndex: "queued"}, {dayIndex: dayOf(now)}} {
		list := &v1alpha1.AgentRunList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), sel, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, err
		}
		for i := range list.Items {
			run := list.Items[i]
			if seen[run.Name] {
				continue
			}
			seen[run.Name] = true
			if run.Status.Phase == v1alpha1.PhaseQueued && !awaitingKueue(&run) {
				line = append(line, quota.WaitingOf(&run))
			}
			counted = append(counted, run)
		}
	}
	return counted, line, nil
}

// Line is a namespace's runs waiting Queued, in the order they start.
func Line(ctx context.Context, c client.Reader, namespace string) ([]quota.Waiting, error) {
	list := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{stateIndex: "queued"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	line := make([]quota.Waiting, 0, len(list.Items))
	for i := range list.Items {
		line = append(line, quota.WaitingOf(&list.Items[i]))
	}
	return quota.Line(line[1:], line[0]), nil
}

// Held lists the namespace's runs held at a cost or token cap, from the cache.
func Held(ctx context.Context, c client.Reader, namespace string) ([]v1alpha1.AgentRun, error) {
	list := &v1alpha1.AgentRunList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{stateIndex: "held"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Caps are what the namespace's AgentQuotas allow together, read from the cache; nil when the
// namespace has none.
func Caps(ctx context.Context, c client.Reader, namespace string) (*quota.Caps, error) {
	return (&CapsCache{}).Caps(ctx, c, namespace)
}

// CapsCache keeps what each namespace's AgentQuotas allow together, and works it out again only
// when one of them changed: every model call and every start asks, and the quotas change
// seldom. It is safe for concurrent use; the caps it hands out are shared and read only.
type CapsCache struct {
	mu sync.Mutex
	m  map[string]cachedCaps
}

type cachedCaps struct {
	// key names the quotas the caps were worked out from: their UIDs and resource versions.
	key  string
	caps *quota.Caps
}

// Caps are the namespace's caps, as Caps reads them.
func (cc *CapsCache) Caps(ctx context.Context, c client.Reader, namespace string) (*quota.Caps, error) {
	quotas := &v1alpha1.AgentQuotaList{}
	if err := c.List(ctx, quotas, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("reading the namespace's AgentQuotas: %w", err)
	}
	if len(quotas.Items) == 0 {
		return nil, nil
	}
	var key strings.Builder
	for i := range quotas.Items {
		q := &quotas.Items[i]
		fmt.Fprintf(&key, "%s/%s/%s;", q.Name, q.UID, q.ResourceVersion)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if got, ok := cc.m[namespace]; ok && got.key == key.String() {
		return got.caps, nil
	}
	caps := quota.CapsOf(quotas.Items)
	if cc.m == nil {
		cc.m = map[string]cachedCaps{}
	}
	cc.m[namespace] = cachedCaps{key: key.String(), caps: &caps}
	return &caps, nil
}
