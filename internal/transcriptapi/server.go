// Package transcriptapi serves runs' transcripts over HTTPS to the people who may read the
// runs: whoever may get an AgentRun may read its transcript, nobody else. Callers authenticate
// as they do to the API server (a bearer token, checked with a TokenReview, or a client
// certificate signed by the cluster's client CA), and each request is authorized with a
// SubjectAccessReview for get on the AgentRun.
//
//	GET /v1/namespaces/{namespace}/agentruns/{name}/records[?after=SEQ][&step=N][&limit=N]
//	GET /v1/namespaces/{namespace}/agentruns/{name}/stream   (Server-Sent Events; Last-Event-ID resumes)
//	GET /v1/namespaces/{namespace}/agentruns/{name}/config
//
// Its client, which readers link without the server's dependencies, is internal/transcriptclient.
package transcriptapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcript"
)

// maxPage bounds the records one request returns, pageBytes their bodies: a page ends with the
// record that reaches pageBytes (so it holds at least one), and the reader asks for the next
// after its last. A reader of a long run of large records holds one page, and so does the
// operator serving it.
const (
	maxPage   = 1000
	pageBytes = 4 << 20
)

// DefaultReauthorize is how often a stream checks again that its caller may read the run.
const DefaultReauthorize = 5 * time.Minute

// Handler serves the transcript API. Requests must pass Authorize first (see NewAuth).
type Handler struct {
	Store transcript.Store
	// Runs reads AgentRuns, from the manager's cache.
	Runs client.Reader
	Auth *Auth
	// Poll is how often a stream looks for new records.
	Poll time.Duration
	// Reauthorize is how often a stream checks again that its caller may read the run, and
	// ends when they no longer may (default DefaultReauthorize).
	Reauthorize time.Duration
}

// ServeMux routes the API.
func (h *Handler) ServeMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/namespaces/{namespace}/agentruns/{name}/records", h.authorized(h.records))
	mux.HandleFunc("GET /v1/namespaces/{namespace}/agentruns/{name}/stream", h.authorized(h.stream))
	mux.HandleFunc("GET /v1/namespaces/{namespace}/agentruns/{name}/config", h.authorized(h.config))
	return mux
}

// authorized lets a request through only for a caller who may get the AgentRun, and the
// AgentSession of a turn.
func (h *Handler) authorized(next func(http.ResponseWriter, *http.Request, *v1alpha1.AgentRun)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if status, msg := h.Auth.Check(r, ns, name); status != http.StatusOK {
			writeError(w, status, msg)
			return
		}
		run := &v1alpha1.AgentRun{}
		if err := h.Runs.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
			if apierrors.IsNotFound(err) {
				writeError(w, http.StatusNotFound, fmt.Sprintf("agentruns.agents.baton.dev %q not found in namespace %s", name, ns))
				return
			}
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if run.Spec.Session != nil {
			if status, msg := h.Auth.CheckRun(r, run); status != http.StatusOK {
				writeError(w, status, msg)
				return
			}
		}
		next(w, r, run)
	}
}

func (h *Handler) query(r *http.Request, run *v1alpha1.AgentRun) (transcript.Query, error) {
	q := transcript.Query{RunUID: string(run.UID), Limit: maxPage, MaxBytes: pageBytes}
	v := r.URL.Query()
	if s := v.Get("after"); s != "" {
		after, err := strconv.ParseInt(s, 10, 64)
		if err != nil || after < 0 {
			return q, fmt.Errorf("after: %q is not a record's sequence number", s)
		}
		q.After = after
	}
	if s := v.Get("step"); s != "" {
		step, err := strconv.ParseInt(s, 10, 32)
		if err != nil || step < 0 {
			return q, fmt.Errorf("step: %q is not a step number", s)
		}
		n := int32(step)
		q.Step = &n
	}
	if s := v.Get("limit"); s != "" {
		limit, err := strconv.Atoi(s)
		if err != nil || limit < 1 || limit > maxPage {
			return q, fmt.Errorf("limit: %q is not between 1 and %d", s, maxPage)
		}
		q.Limit = limit
	}
	return q, nil
}

func (h *Handler) records(w http.ResponseWriter, r *http.Request, run *v1alpha1.AgentRun) {
	q, err := h.query(r, run)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	recs, err := h.Store.List(r.Context(), q)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "reading the transcript: "+err.Error())
		return
	}
	last := q.After
	if len(recs) > 0 {
		last = recs[len(recs)-1].Seq
	}
	// The page (as transcriptclient.Page reads it) is written a record at a time, as it is
	// encoded: serving it takes the page and one record's encoding, not the page twice.
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"namespace":%s,"run":%s,"uid":%s,"last":%d,"records":[`, mustJSON(run.Namespace), mustJSON(run.Name), mustJSON(string(run.UID)), last)
	for i := range recs {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		_, _ = w.Write(mustJSON(records.FromStore(recs[i])))
		recs[i].Body = nil
	}
	_, _ = io.WriteString(w, "]}\n")
}

// config sends the config the run pinned, as its revision holds it: what a replay of the run
// needs besides its records, for a caller who may read the run (and who need not read
// ControllerRevisions). Only the operator's own revisions are read.
func (h *Handler) config(w http.ResponseWriter, r *http.Request, run *v1alpha1.AgentRun) {
	name := run.Status.ConfigRevision
	if name == "" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("agentrun %s has pinned no config yet", run.Name))
		return
	}
	rev := &appsv1.ControllerRevision{}
	err := h.Runs.Get(r.Context(), client.ObjectKey{Namespace: run.Namespace, Name: name}, rev)
	switch {
	case apierrors.IsNotFound(err):
		writeError(w, http.StatusNotFound, fmt.Sprintf("the config revision %s of agentrun %s no longer exists", name, run.Name))
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	pinned := records.PinnedConfig{Revision: name}
	if err := json.Unmarshal(rev.Data.Raw, &pinned.Spec); err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("decoding config revision %s: %v", name, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(mustJSON(pinned))
}

// stream sends the run's records as Server-Sent Events as they are written, each with its
// sequence number as the event ID, from after Last-Event-ID (or ?after=) on; it ends with an
// "end" event once the run has ended and every record is sent.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, run *v1alpha1.AgentRun) {
	q, err := h.query(r, run)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after, err := strconv.ParseInt(id, 10, 64)
		if err != nil || after < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID: %q is not a record's sequence number", id))
			return
		}
		q.After = after
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	poll := h.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	reauthorize := h.Reauthorize
	if reauthorize <= 0 {
		reauthorize = DefaultReauthorize
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	authorized := time.Now()
	for {
		if time.Since(authorized) >= reauthorize {
			// Access can be taken away while a run waits for days: the stream ends then.
			if status, msg := h.Auth.CheckRun(r, run); status != http.StatusOK {
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustJSON(map[string]string{"message": fmt.Sprintf("access ended (%d): %s", status, msg)}))
				flusher.Flush()
				return
			}
			authorized = time.Now()
		}
		ended := h.ended(r.Context(), run)
		recs, err := h.Store.List(r.Context(), q)
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustJSON(map[string]string{"message": "reading the transcript: " + err.Error()}))
			flusher.Flush()
			return
		}
		for i := range recs {
			fmt.Fprintf(w, "id: %d\nevent: record\ndata: %s\n\n", recs[i].Seq, mustJSON(records.FromStore(recs[i])))
			q.After = recs[i].Seq
			recs[i].Body = nil
		}
		if len(recs) > 0 {
			flusher.Flush()
		}
		if ended && len(recs) == 0 {
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", mustJSON(map[string]string{"phase": string(run.Status.Phase), "reason": string(run.Status.TerminationReason)}))
			flusher.Flush()
			return
		}
		if len(recs) > 0 {
			continue // more may be waiting: the next page at once
		}
		select {
		case <-r.Context().Done():
			return
		case <-ticker.C:
		}
	}
}

// ended reports whether the run has ended (or is gone), refreshing run from the cache.
func (h *Handler) ended(ctx context.Context, run *v1alpha1.AgentRun) bool {
	fresh := &v1alpha1.AgentRun{}
	if err := h.Runs.Get(ctx, client.ObjectKeyFromObject(run), fresh); err != nil || fresh.UID != run.UID {
		return true
	}
	*run = *fresh
	return run.Status.Phase.Terminal()
}

// mustJSON encodes v as the transcript keeps its records: <, > and & as they are.
func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Status is an error as the API returns it, shaped like the API server's own.
type Status struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(Status{Code: code, Message: msg})
}
