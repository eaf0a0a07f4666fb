package notifier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/metrics"
	"github.com/baton-dev/baton/internal/notify"
	"github.com/baton-dev/baton/internal/outbox"
)

// deliverLoop delivers the outbox's due entries, each in a goroutine of its own, at most
// Workers at once; it looks again every deliverEvery, and as soon as events are written.
func (n *Notifier) deliverLoop(ctx context.Context) {
	workers := n.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	slots := make(chan struct{}, workers)
	tick := time.NewTicker(deliverEvery)
	defer tick.Stop()
	for {
		n.mu.Lock()
		clear(n.finished)
		n.mu.Unlock()
		due, err := n.Outbox.Due(ctx, n.Clock.Now(), dueBatch)
		if err != nil && ctx.Err() == nil {
			n.Log.Error(err, "Reading the outbox")
		}
		for _, e := range due {
			if !n.take(e.Seq) {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				defer func() { <-slots; n.release(e.Seq) }()
				n.deliver(ctx, e)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-n.wake:
		}
	}
}

// take claims an entry to deliver: not one being delivered, nor one that finished since the
// outbox was read (its read may predate its delivery).
func (n *Notifier) take(seq int64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inFlight[seq] || n.finished[seq] {
		return false
	}
	n.inFlight[seq] = true
	return true
}

func (n *Notifier) release(seq int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.inFlight, seq)
	n.finished[seq] = true
}

// deliver sends one entry to its sink and records what became of it.
func (n *Notifier) deliver(ctx context.Context, e outbox.Entry) {
	var ev notify.Event
	if err := json.Unmarshal(e.Body, &ev); err != nil {
		n.finish(ctx, e, ev, notify.GiveUp, "", fmt.Errorf("the outbox entry cannot be read: %w", err))
		return
	}
	status, retryAfter, err := n.send(ctx, e, ev)
	outcome := notify.OutcomeOf(status)
	if err != nil && status == 0 && errors.Is(err, errNoSink) {
		outcome = notify.GiveUp
	}
	n.finish(ctx, e, ev, outcome, retryAfter, err)
}

var errNoSink = errors.New("no such sink")

// send posts the event to the entry's sink, signed when it has a key, and says what the sink
// answered (0 when it did not).
func (n *Notifier) send(ctx context.Context, e outbox.Entry, ev notify.Event) (int, string, error) {
	cfg, ok := n.config(ctx, e.Namespace, e.Config)
	if !ok {
		return 0, "", fmt.Errorf("%w: AgentConfig %s/%s has no spec.notify", errNoSink, e.Namespace, e.Config)
	}
	var sink *v1alpha1.NotifySink
	for i := range cfg.Spec.Notify {
		if cfg.Spec.Notify[i].Name == e.Sink {
			sink = &cfg.Spec.Notify[i]
		}
	}
	if sink == nil {
		return 0, "", fmt.Errorf("%w: AgentConfig %s/%s has no sink %s", errNoSink, e.Namespace, e.Config, e.Sink)
	}
	url := sink.URL
	if ref := sink.URLFrom; ref != nil {
		var err error
		if url, err = n.Secrets.SecretKey(ctx, e.Namespace, ref.Name, ref.Key); err != nil {
			return 0, "", fmt.Errorf("reading the sink's URL from Secret %s: %w", ref.Name, err)
		}
	}
	body, ctype, err := notify.Body(ev, sink.Format)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 400, "", fmt.Errorf("the sink's URL: %w", err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("User-Agent", "baton-notifier")
	if ref := sink.SecretRef; ref != nil {
		key, err := n.Secrets.SecretKey(ctx, e.Namespace, ref.Name, ref.Key)
		if err != nil {
			return 0, "", fmt.Errorf("reading the sink's signing key from Secret %s: %w", ref.Name, err)
		}
		req.Header.Set(notify.SignatureHeader, notify.Sign([]byte(key), body, n.Clock.Now()))
	}
	resp, err := n.HTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, resp.Header.Get("Retry-After"), fmt.Errorf("the sink answered %s", resp.Status)
	}
	return resp.StatusCode, "", nil
}

// finish records a delivery's outcome in the outbox, the counts and the metrics. An entry to
// be tried again past notify.GiveUpAfter is given up.
func (n *Notifier) finish(ctx context.Context, e outbox.Entry, ev notify.Event, outcome notify.Outcome, retryAfter string, err error) {
	now := n.Clock.Now()
	result := "sent"
	if outcome == notify.Retry {
		next, ok := notify.NextTry(e.Written, now, e.Attempts+1, retryAfter)
		if ok {
			result = "retry"
			if ferr := n.Outbox.Failed(ctx, e.Seq, e.Attempts+1, next, bounded(err)); ferr != nil {
				n.Log.Error(ferr, "Recording a failed notification")
			}
		} else {
			outcome = notify.GiveUp
		}
	}
	if outcome != notify.Retry {
		if outcome == notify.GiveUp {
			result = "given-up"
		}
		if derr := n.Outbox.Delivered(ctx, e.Seq, now, outcome == notify.GiveUp); derr != nil {
			n.Log.Error(derr, "Recording a delivered notification")
		}
	}
	if outcome == notify.Sent {
		metrics.NotificationDelay.Observe(now.Sub(ev.Time).Seconds())
	}
	metrics.Notifications.WithLabelValues(e.Namespace, e.Config, e.Sink, string(ev.Type), result).Inc()
	n.count(e, result, err)
	if err != nil {
		n.Log.V(1).Info("A notification was not delivered", "namespace", e.Namespace, "config", e.Config, "sink", e.Sink,
			"event", ev.Type, "result", result, "error", bounded(err))
	}
}

// bounded is an error's message within what status and the outbox keep of it.
func bounded(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 1000 {
		s = s[:1000] + "..."
	}
	return s
}
