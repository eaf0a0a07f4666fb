package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/transcriptapi"
)

// Live updates. A page names the events that change it (/live?watch=runs or watch=run); the
// console watches the runs with the user's credentials, and for one run also follows its
// transcript, and sends the page a "change" event, at most a few a second, whenever something
// it shows may have changed. The page then fetches itself again and swaps in the parts that
// differ (static/console.js).

const (
	// coalesce is how long changes are gathered into one event.
	coalesce = 250 * time.Millisecond
	// keepAlive is how often an idle stream sends a comment, so proxies and browsers keep it.
	keepAlive = 20 * time.Second
	// rewatch is how long a watch that ended waits before it starts again.
	rewatch = time.Second
)

// live streams the events that change a page, as server-sent events.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	switch q.Get("watch") {
	case "runs":
		scopes := s.scopes(ctx)
		if ns := q.Get("namespace"); ns != "" {
			scopes = []string{ns}
		}
		for _, ns := range scopes {
			go s.watchRuns(ctx, []client.ListOption{client.InNamespace(ns)}, notify)
		}
	case "run":
		namespace, name := q.Get("namespace"), q.Get("name")
		go s.watchRuns(ctx, []client.ListOption{client.InNamespace(namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}}, notify)
		if s.opts.Transcripts != nil {
			go s.followTranscript(ctx, namespace, name, notify)
		}
	default:
		http.Error(w, "watch: must be runs or run", http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": live\n\n")
	flusher.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case <-changed:
			// Gather what changes close together into one event.
			select {
			case <-ctx.Done():
				return
			case <-time.After(coalesce):
			}
			fmt.Fprint(w, "event: change\ndata: {}\n\n")
			flusher.Flush()
		}
	}
}

// watchRuns watches runs with the user's credentials and calls notify on every change, until
// ctx ends; a watch that ends, or cannot start, is started again.
func (s *Server) watchRuns(ctx context.Context, opts []client.ListOption, notify func()) {
	first := true
	for ctx.Err() == nil {
		var list v1alpha1.AgentRunList
		watcher, err := s.opts.Kube.Watch(ctx, &list, opts...)
		if err == nil {
			if !first {
				// Something may have changed while no watch was open.
				notify()
			}
			first = false
			for range watcher.ResultChan() {
				notify()
			}
			watcher.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(rewatch):
		}
	}
}

// followTranscript calls notify for every record of the run as it is written: a step's tool
// calls and its answer show before the run's status is written. It stops when the run ends; a
// stream that fails starts again.
func (s *Server) followTranscript(ctx context.Context, namespace, name string, notify func()) {
	for ctx.Err() == nil {
		end, err := s.opts.Transcripts.Stream(ctx, namespace, name, func(transcriptapi.Record) error {
			notify()
			return nil
		})
		if err == nil && end != "" {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * rewatch):
		}
	}
}
