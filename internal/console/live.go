package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/workflow"
)

// Live updates. A page names the events that change it (/live?watch=runs, watch=run or
// watch=endpoints); the console watches the runs or the model endpoints with the user's
// credentials, and for one run also follows its transcript, and sends the page a "change"
// event, at most a few a second, whenever something it shows may have changed. The page then fetches itself again and swaps in the parts that
// differ (static/console.js).

const (
	// coalesce is how long changes are gathered into one event.
	coalesce = 250 * time.Millisecond
	// keepAlive is how often an idle stream sends a comment, so proxies and browsers keep it.
	keepAlive = 20 * time.Second
	// rewatch is how long a watch that ended waits before it starts again; maxRewatch is the
	// longest it waits after failing again and again.
	rewatch    = time.Second
	maxRewatch = 30 * time.Second
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
	if !s.follow(ctx, q, notify) {
		http.Error(w, "watch: must be runs, run or endpoints", http.StatusBadRequest)
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

// follow starts watching what the page names, calling notify on every change, until ctx ends;
// false when it names nothing the console watches.
func (s *Server) follow(ctx context.Context, q url.Values, notify func()) bool {
	runs := func() client.ObjectList { return &v1alpha1.AgentRunList{} }
	switch q.Get("watch") {
	case "runs":
		scopes := s.scopes.get(ctx)
		if ns := q.Get("namespace"); ns != "" {
			scopes = []string{ns}
		}
		for _, ns := range scopes {
			go s.watchList(ctx, runs, []client.ListOption{client.InNamespace(ns)}, q.Get("rv"), notify)
		}
	case "run":
		namespace, name := q.Get("namespace"), q.Get("name")
		go s.watchList(ctx, runs, []client.ListOption{client.InNamespace(namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}}, q.Get("rv"), notify)
		// The run's branches: their tokens and cost change while they run, which the run's own
		// status does not say until they end.
		go s.watchList(ctx, runs, []client.ListOption{client.InNamespace(namespace),
			client.MatchingLabels{v1alpha1.LabelParent: workflow.ParentLabel(name)}}, q.Get("rv"), notify)
		if s.opts.Transcripts != nil {
			go s.followTranscript(ctx, namespace, name, time.Now(), notify)
		}
	case "endpoints":
		for _, ns := range s.endpointScopes.get(ctx) {
			go s.watchList(ctx, func() client.ObjectList { return &v1alpha1.ModelEndpointList{} },
				[]client.ListOption{client.InNamespace(ns)}, q.Get("rv"), notify)
		}
		// Only when the page could list them: a watch the API server refuses would retry
		// for as long as the page is open.
		if q.Get("cluster") == "true" {
			go s.watchList(ctx, func() client.ObjectList { return &v1alpha1.ClusterModelEndpointList{} }, nil, q.Get("rv"), notify)
		}
	default:
		return false
	}
	return true
}

// watchList watches the objects newList lists, with the user's credentials, and calls notify on
// every change, until ctx ends. The watch starts from version, the state the page was drawn from, so it sees every
// change made since and opening a page costs no event. Without one, or when the API server no
// longer has it, the watch starts from now and the page looks again once. A watch that ends
// starts again, after a pause that grows while it keeps failing (the user may have lost the
// right to watch).
func (s *Server) watchList(ctx context.Context, newList func() client.ObjectList, opts []client.ListOption, version string, notify func()) {
	pause := rewatch
	for ctx.Err() == nil {
		if version == "" {
			list := newList()
			if err := s.opts.Kube.List(ctx, list, append(opts, client.Limit(1))...); err == nil {
				version = list.GetResourceVersion()
				notify()
			}
		}
		watcher, err := s.opts.Kube.Watch(ctx, newList(), append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: version}})...)
		if err == nil {
			pause = rewatch
			for event := range watcher.ResultChan() {
				if event.Type == watch.Error {
					// Too old a version, most often: start again from a fresh list, which may
					// have missed changes, so the page looks again.
					version = ""
					notify()
					break
				}
				if o, ok := event.Object.(client.Object); ok {
					version = o.GetResourceVersion()
				}
				notify()
			}
			watcher.Stop()
		} else {
			// The version may be too old to watch from: start again from a fresh list.
			version = ""
			pause = min(2*pause, maxRewatch)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// followTranscript calls notify for every record of the run written since the page was opened:
// a step's tool calls and its answer show before the run's status is written. It stops when
// the run ends; a stream that fails starts again, after a pause that grows while it keeps
// failing.
func (s *Server) followTranscript(ctx context.Context, namespace, name string, opened time.Time, notify func()) {
	pause := 5 * rewatch
	// The stream starts from the run's first record; those the page was drawn with are not news.
	since := opened.Add(-2 * time.Second)
	for ctx.Err() == nil {
		end, err := s.opts.Transcripts.Stream(ctx, namespace, name, func(r records.Record) error {
			if r.Time.After(since) {
				notify()
			}
			return nil
		})
		if err == nil && end != "" {
			return
		}
		if err != nil {
			pause = min(2*pause, maxRewatch)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}
