package notifier

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/outbox"
)

// sinkKey names a sink: its config's namespace and name, and its own.
type sinkKey struct{ namespace, config, sink string }

// sinkCounts are what became of a sink's last deliveries since its config's status was last
// written. The counts themselves are the outbox's (outbox.Counts), which a restart keeps.
type sinkCounts struct {
	lastError string
	failing   bool
}

func (n *Notifier) count(e outbox.Entry, result string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := sinkKey{e.Namespace, e.Config, e.Sink}
	c := n.counts[k]
	if c == nil {
		c = &sinkCounts{}
		n.counts[k] = c
	}
	c.failing = result != "sent"
	if err != nil {
		c.lastError = bounded(err)
	}
}

// flush writes, to each config whose sinks were sent anything since the last flush, what the
// outbox says they were sent, how many wait to be tried again, and whether one fails.
func (n *Notifier) flush(ctx context.Context) {
	n.mu.Lock()
	counts := n.counts
	n.counts = map[sinkKey]*sinkCounts{}
	n.mu.Unlock()
	if len(counts) == 0 {
		return
	}
	totals, err := n.Outbox.Counts(ctx)
	if err != nil {
		n.Log.Error(err, "Counting the outbox's notifications")
		n.putBack(counts)
		return
	}
	configs := map[client.ObjectKey]bool{}
	for k := range counts {
		configs[client.ObjectKey{Namespace: k.namespace, Name: k.config}] = true
	}
	for key := range configs {
		if err := n.writeStatus(ctx, key, counts, totals); err != nil {
			n.Log.Error(err, "Writing a config's notification counts", "agentConfig", key.String())
			n.putBack(counts)
		}
	}
}

// putBack keeps what could not be written for the next flush, unless newer news came.
func (n *Notifier) putBack(counts map[sinkKey]*sinkCounts) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, c := range counts {
		if _, newer := n.counts[k]; !newer {
			n.counts[k] = c
		}
	}
}

func (n *Notifier) writeStatus(ctx context.Context, key client.ObjectKey, counts map[sinkKey]*sinkCounts, totals map[[3]string]outbox.Counts) error {
	cfg := &v1alpha1.AgentConfig{}
	if err := n.Client.Get(ctx, key, cfg); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	var failing []string
	var status []v1alpha1.SinkStatus
	for _, sink := range cfg.Spec.Notify {
		st := v1alpha1.SinkStatus{Name: sink.Name}
		if i := slices.IndexFunc(cfg.Status.Notifications, func(s v1alpha1.SinkStatus) bool { return s.Name == sink.Name }); i >= 0 {
			st = cfg.Status.Notifications[i]
		}
		k := sinkKey{key.Namespace, key.Name, sink.Name}
		t := totals[[3]string{k.namespace, k.config, k.sink}]
		st.Sent, st.Retrying, st.GivenUp = t.Sent, t.Retrying, t.GivenUp
		if c := counts[k]; c != nil {
			if c.lastError != "" {
				st.LastError = c.lastError
			}
			if c.failing {
				failing = append(failing, sink.Name)
			}
		}
		status = append(status, st)
	}
	cfg.Status.Notifications = status
	c := metav1.Condition{Type: v1alpha1.ConditionNotifying, Status: metav1.ConditionTrue, Reason: "Delivered",
		Message: "the sinks take their events", ObservedGeneration: cfg.Generation}
	if len(failing) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, "SinkFailing"
		c.Message = fmt.Sprintf("sinks failing: %v (status.notifications says why)", failing)
	}
	meta.SetStatusCondition(&cfg.Status.Conditions, c)
	metrics.APIWrites.WithLabelValues("config-status").Inc()
	return n.Client.Status().Patch(ctx, cfg, patch)
}
