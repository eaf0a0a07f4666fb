// Package a2aserver serves teams as Agent2Agent (A2A) agents: an AgentConfig with
// spec.a2a.expose has an AgentCard and a JSON-RPC endpoint, in A2A 1.0 and 0.3, on the
// operator's HTTPS address beside the transcript API, with the protocol's Go SDK. A task is an
// AgentRun: a message starts one (or, for a task that asks for input, replies to it), and
// getting, cancelling and subscribing to a task read and annotate the run (docs/a2a.md).
//
//	GET  /namespaces/{namespace}/agentconfigs/{name}/.well-known/agent-card.json
//	POST /namespaces/{namespace}/agentconfigs/{name}/a2a        (JSON-RPC, A2A 1.0)
//	POST /namespaces/{namespace}/agentconfigs/{name}/a2a/v0.3   (JSON-RPC, A2A 0.3)
//
// Callers authenticate as to the API server, with a client certificate or a token made for
// Baton's audience (DefaultTokenAudience unless the operator names another). Reading the card,
// and every JSON-RPC call, needs get on the AgentConfig, checked before anything else is read
// or a place is taken; sending a message that starts a task needs create on agentruns in the
// namespace; a task is its sender's, and anyone else needs get (to read or follow it) or
// update (to reply to or cancel it) on the run.
package a2aserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
	"github.com/baton-dev/baton/internal/transcriptapi"
)

// Auth authenticates and authorizes callers (transcriptapi.Auth).
type Auth interface {
	Authenticate(r *http.Request) (user.Info, int, string)
	Allowed(ctx context.Context, u user.Info, access transcriptapi.Access) (int, string)
}

// Defaults of the Handler's bounds.
const (
	DefaultPoll              = 250 * time.Millisecond
	DefaultMaxRequests       = 512
	DefaultMaxNamespaceCalls = 128
	DefaultMaxCallerCalls    = 16
	DefaultMaxCallerStreams  = 8
	DefaultStreamLifetime    = time.Hour
	DefaultReauthorize       = time.Minute
	DefaultKeepAlive         = 15 * time.Second
	maxBody                  = 1 << 20
	maxIDBytes               = 256
	cancelWait               = 10 * time.Second
	retryAfterBusy           = "5"
	pathPrefix               = "/namespaces/{namespace}/agentconfigs/{name}"
	defaultCancelledReason   = "cancelled through A2A by %s"
)

// DefaultTokenAudience is the audience a caller's bearer token is made for
// (kubectl create token SERVICEACCOUNT --audience agents.baton.dev), unless the operator
// names another.
const DefaultTokenAudience = "agents.baton.dev"

// Handler serves the teams that are exposed as A2A agents.
type Handler struct {
	// Client reads AgentConfigs and AgentRuns from the manager's cache and writes AgentRuns.
	Client client.Client
	// Reader reads an AgentRun from the API server, for a run just created that the cache
	// may not hold yet.
	Reader client.Reader
	Auth   Auth
	// Audience is the audience the Auth accepts bearer tokens for, which the cards name
	// (default DefaultTokenAudience).
	Audience string
	// URL is the operator's address as A2A clients reach it (https://host[:port]), which the
	// cards name; empty, each card names the address its request came to.
	URL string
	// Poll is how often a task that is waited for or followed is read again (default
	// DefaultPoll).
	Poll time.Duration
	// MaxRequests, MaxNamespaceCalls and MaxCallerCalls bound the JSON-RPC requests served at
	// once: in all, to the teams of one namespace, and from one caller; past them a caller is
	// answered 429 (defaults DefaultMaxRequests, DefaultMaxNamespaceCalls and
	// DefaultMaxCallerCalls).
	MaxRequests, MaxNamespaceCalls, MaxCallerCalls int
	// MaxCallerStreams bounds, within MaxCallerCalls, the calls one caller holds open while a
	// task goes on (streams, subscriptions and sends that wait), so that they leave room for
	// the caller's short calls (default DefaultMaxCallerStreams).
	MaxCallerStreams int
	// StreamLifetime is the longest a stream, a subscription or a send that waits follows its
	// task; the caller subscribes again to go on (default DefaultStreamLifetime).
	StreamLifetime time.Duration
	// Reauthorize is how often a call that follows a task checks again that its caller's
	// credentials hold and that they may still follow it, and ends when not (default
	// DefaultReauthorize).
	Reauthorize time.Duration
	// KeepAlive is how often a stream that has nothing new says so, so that proxies keep it
	// open (default DefaultKeepAlive).
	KeepAlive time.Duration
	// SessionTTL is the ttlSecondsAfterIdle of the sessions A2A contexts open (default
	// DefaultSessionTTL).
	SessionTTL int32
	Clock      clock.PassiveClock

	mu          sync.Mutex
	inFlight    int
	byNamespace map[string]int
	byCaller    map[string]int
	streams     map[string]int
}

// Register adds the A2A routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	keepAlive := a2asrv.WithTransportKeepAlive(cmp.Or(h.KeepAlive, DefaultKeepAlive))
	mux.HandleFunc("GET "+pathPrefix+cardPath, h.card)
	mux.HandleFunc("POST "+pathPrefix+v1Path, h.jsonrpc(func(t *team) http.Handler { return a2asrv.NewJSONRPCHandler(t, keepAlive) }))
	mux.HandleFunc("POST "+pathPrefix+v03Path, h.jsonrpc(func(t *team) http.Handler { return a2av0.NewJSONRPCHandler(t, keepAlive) }))
}

// card serves an exposed team's AgentCard to whoever may get its AgentConfig. It is written
// here, not by the SDK's card handler, whose CORS headers would let any web page read it with a
// browser's credentials.
func (h *Handler) card(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	_, status, msg := h.authorize(r, ns, name)
	if status != http.StatusOK {
		writeError(w, status, msg)
		return
	}
	cfg, status, msg := h.exposed(r.Context(), ns, name)
	if status != http.StatusOK {
		writeError(w, status, msg)
		return
	}
	card := CardOf(cfg, h.base(r, ns, name), cmp.Or(h.Audience, DefaultTokenAudience))
	var body []byte
	var err error
	if r.Header.Get("A2A-Version") == "1.0" {
		body, err = json.Marshal(card)
	} else {
		// A caller that names no version reads the card of 0.3 and 1.0 together. Its security
		// schemes are left out: 1.0 and 0.3 write them apart, and a parser of either fails on
		// the other's; the JSON-RPC endpoints answer 401 to a caller without credentials all
		// the same.
		card.SecuritySchemes, card.SecurityRequirements = nil, nil
		body, err = a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer).CardJSON(r.Context())
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "the card cannot be written")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "A2A-Version")
	_, _ = w.Write(body)
}

// jsonrpc serves an exposed team's JSON-RPC endpoint, in the protocol version serve speaks, to
// a caller who may get its AgentConfig; each method checks what else it needs. Nothing is read
// and no place is taken for a caller who may not.
func (h *Handler) jsonrpc(serve func(*team) http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		u, status, msg := h.authorize(r, ns, name)
		if status != http.StatusOK {
			writeError(w, status, msg)
			return
		}
		if !h.acquire(ns, u.GetName()) {
			w.Header().Set("Retry-After", retryAfterBusy)
			writeError(w, http.StatusTooManyRequests, "too many A2A requests at once; try again shortly")
			return
		}
		defer h.release(ns, u.GetName())
		cfg, status, msg := h.exposed(r.Context(), ns, name)
		if status != http.StatusOK {
			writeError(w, status, msg)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		serve(&team{h: h, cfg: cfg, caller: u, req: r}).ServeHTTP(w, r)
	}
}

// authorize is the caller, if they may get the AgentConfig; else the status to answer and why.
func (h *Handler) authorize(r *http.Request, ns, name string) (user.Info, int, string) {
	u, status, msg := h.Auth.Authenticate(r)
	if status != http.StatusOK {
		return nil, status, msg
	}
	status, msg = h.Auth.Allowed(r.Context(), u, transcriptapi.Access{Verb: "get", Resource: "agentconfigs", Namespace: ns, Name: name})
	return u, status, msg
}

// exposed is the AgentConfig, if it exists and is exposed as an A2A agent.
func (h *Handler) exposed(ctx context.Context, ns, name string) (*v1alpha1.AgentConfig, int, string) {
	cfg := &v1alpha1.AgentConfig{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusNotFound, fmt.Sprintf("agentconfigs.agents.baton.dev %q not found in namespace %s", name, ns)
		}
		log.FromContext(ctx).Error(err, "Reading an AgentConfig for A2A", "agentConfig", klog.KRef(ns, name))
		return nil, http.StatusInternalServerError, "the AgentConfig cannot be read now; try again shortly"
	}
	if cfg.Spec.A2A == nil || !cfg.Spec.A2A.Expose {
		return nil, http.StatusNotFound, fmt.Sprintf("AgentConfig %s/%s is not served as an A2A agent: set spec.a2a.expose: true", ns, name)
	}
	return cfg, http.StatusOK, ""
}

// base is the URL a team's paths are under.
func (h *Handler) base(r *http.Request, ns, name string) string {
	root := h.URL
	if root == "" {
		root = "https://" + r.Host
	}
	return fmt.Sprintf("%s/namespaces/%s/agentconfigs/%s", root, ns, name)
}

// acquire takes a place for a caller's request to a team of namespace ns, if one is free.
func (h *Handler) acquire(ns, caller string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	maxAll := orDefault(h.MaxRequests, DefaultMaxRequests)
	maxNamespace, maxOne := orDefault(h.MaxNamespaceCalls, DefaultMaxNamespaceCalls), orDefault(h.MaxCallerCalls, DefaultMaxCallerCalls)
	if h.inFlight >= maxAll || h.byNamespace[ns] >= maxNamespace || h.byCaller[caller] >= maxOne {
		return false
	}
	if h.byCaller == nil {
		h.byCaller, h.byNamespace = map[string]int{}, map[string]int{}
	}
	h.inFlight++
	h.byNamespace[ns]++
	h.byCaller[caller]++
	return true
}

func (h *Handler) release(ns, caller string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight--
	if h.byNamespace[ns]--; h.byNamespace[ns] <= 0 {
		delete(h.byNamespace, ns)
	}
	if h.byCaller[caller]--; h.byCaller[caller] <= 0 {
		delete(h.byCaller, caller)
	}
}

// holdStream takes one of the caller's places for a call that follows a task, if one is free.
func (h *Handler) holdStream(caller string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[caller] >= orDefault(h.MaxCallerStreams, DefaultMaxCallerStreams) {
		return false
	}
	if h.streams == nil {
		h.streams = map[string]int{}
	}
	h.streams[caller]++
	return true
}

func (h *Handler) releaseStream(caller string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[caller]--; h.streams[caller] <= 0 {
		delete(h.streams, caller)
	}
}

func (h *Handler) poll() time.Duration {
	return cmp.Or(h.Poll, DefaultPoll)
}

func (h *Handler) streamLifetime() time.Duration {
	return cmp.Or(h.StreamLifetime, DefaultStreamLifetime)
}

func (h *Handler) sessionTTL() int32 {
	return cmp.Or(h.SessionTTL, DefaultSessionTTL)
}

func (h *Handler) reauthorize() time.Duration {
	return cmp.Or(h.Reauthorize, DefaultReauthorize)
}

func (h *Handler) now() time.Time {
	if h.Clock == nil {
		return time.Now()
	}
	return h.Clock.Now()
}

func orDefault(n, d int) int {
	if n > 0 {
		return n
	}
	return d
}

// writeError answers with status and a JSON body that says why.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
