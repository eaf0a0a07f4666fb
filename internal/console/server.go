// Package console serves Baton's web console: the runs and their timelines, live as they change;
// the gates waiting for the person at the keyboard, with what there is to judge; and the
// decisions they make. `kubectl baton ui` serves it on localhost. Every request it makes to the
// API server and the transcript API carries that person's own kubeconfig credentials, so RBAC,
// the approve verb and the admission webhook's attribution apply to them; the browser never
// holds a Kubernetes credential.
//
// The pages are rendered on the server from Go templates and work without script; a small
// embedded script swaps in the parts of a page that changed when the server says so. Nothing is
// fetched from the internet.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/internal/records"
	"github.com/baton-dev/baton/internal/transcriptclient"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Transcripts reads runs' transcripts from the operator's transcript API.
type Transcripts interface {
	// Records reads a run's records, all of them or one step's.
	Records(ctx context.Context, namespace, name string, step int32) (transcriptclient.Page, error)
	// Pages calls each with a run's records, all of them or one step's, a page at a time.
	Pages(ctx context.Context, namespace, name string, step int32, each func(transcriptclient.Page) error) error
	Stream(ctx context.Context, namespace, name string, each func(records.Record) error) (string, error)
}

// Options configure a console.
type Options struct {
	// Kube reads and writes Baton's kinds with the user's credentials. Its scheme must know
	// Baton's kinds, authorization/v1 and core/v1.
	Kube client.WithWatch
	// Transcripts reads transcripts with the user's credentials; nil when the transcript API
	// could not be reached, and TranscriptsErr says why.
	Transcripts    Transcripts
	TranscriptsErr error
	// User is who the credentials belong to, as the API server says.
	User string
	// Namespaces are where the console looks for runs; empty, every namespace the user may
	// list runs in.
	Namespaces []string
	// DefaultNamespace is the kubeconfig's namespace: where new runs start by default, and where
	// the console looks when the user may not list runs in every namespace.
	DefaultNamespace string
}

// Server is the console's HTTP server.
type Server struct {
	opts Options
	// token is in the URL the user opens first. It works once: the browser that opens it gets
	// session, as a cookie, and the URL is then spent.
	token, session string
	used           atomic.Bool
	pages          map[string]*template.Template
	mux            *http.ServeMux
	access         *accessCache
	scopes         *scopeCache
	// endpointScopes are where the console lists ModelEndpoints.
	endpointScopes *scopeCache
	// host and port are where the console listens, once it does: the Host header must name
	// them.
	host, port string
}

// New builds a console with a fresh random token.
func New(opts Options) (*Server, error) {
	token, err := secret()
	if err != nil {
		return nil, err
	}
	session, err := secret()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, token: token, session: session, access: newAccessCache(opts.Kube, 30*time.Second)}
	s.scopes = &scopeCache{find: s.findScopes, ttl: 30 * time.Second}
	s.endpointScopes = &scopeCache{find: func(ctx context.Context) []string { return s.scopesOf(ctx, "modelendpoints") }, ttl: 30 * time.Second}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pages
	static, _ := fs.Sub(staticFS, "static")
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/runs", http.StatusSeeOther) })
	s.mux.HandleFunc("GET /runs", s.runsPage)
	s.mux.HandleFunc("GET /runs/{namespace}/{name}", s.runPage)
	s.mux.HandleFunc("GET /runs/{namespace}/{name}/steps/{step}", s.stepPage)
	s.mux.HandleFunc("POST /runs/{namespace}/{name}/decide", s.decide)
	s.mux.HandleFunc("POST /runs/{namespace}/{name}/retry", s.retry)
	s.mux.HandleFunc("GET /sessions", s.sessionsPage)
	s.mux.HandleFunc("GET /sessions/{namespace}/{name}", s.sessionPage)
	s.mux.HandleFunc("GET /inbox", s.inboxPage)
	s.mux.HandleFunc("GET /new", s.newPage)
	s.mux.HandleFunc("POST /new", s.start)
	s.mux.HandleFunc("GET /endpoints", s.endpointsPage)
	s.mux.HandleFunc("GET /live", s.live)
	return s, nil
}

// secret is 32 random bytes, as text.
func secret() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// URL is the address to open first: it carries the token, which the console trades for a
// cookie and takes out of the address bar.
func (s *Server) URL(addr net.Addr) string {
	return fmt.Sprintf("http://%s/?token=%s", addr, s.token)
}

// URLTo is URL, then the page a link names (a notification's link to a gate, /runs/NS/RUN#gate):
// the console opens it once it has traded the token.
func (s *Server) URLTo(addr net.Addr, page string) string {
	if !localPage(page) {
		return s.URL(addr)
	}
	return s.URL(addr) + "&next=" + url.QueryEscape(page)
}

// localPage says whether page is one of the console's own pages, to go to after the token.
func localPage(page string) bool {
	for _, prefix := range []string{"/runs/", "/sessions/", "/inbox"} {
		if strings.HasPrefix(page, prefix) && !strings.Contains(page, "//") && !strings.ContainsAny(page, "\\\r\n") {
			return true
		}
	}
	return false
}

// Serve serves the console on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	host, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return err
	}
	s.host, s.port = host, port
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// contentPolicy lets a page load only the console's own script, styles and images, and post
// forms only to the console.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler is the console behind its guard: a request must name the console's own loopback
// address (so a site that rebinds its DNS name to 127.0.0.1 is refused), carry the token's
// cookie, and, when it changes anything, come from the console's own pages (Origin). No CORS
// header is ever sent.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on a form
		// post, which the Origin check must refuse.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !s.loopback(r.Host) {
			http.Error(w, "this console answers only at its own loopback address", http.StatusMisdirectedRequest)
			return
		}
		if token := r.URL.Query().Get("token"); token != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
			if !equal(token, s.token) {
				http.Error(w, "this token is not the console's: open the URL kubectl baton ui printed", http.StatusUnauthorized)
				return
			}
			if !s.used.CompareAndSwap(false, true) {
				http.Error(w, "this URL was opened already, and works once: open the console in the browser that opened it, or start kubectl baton ui again for a new URL", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie(), Value: s.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			next := "/runs"
			if page := r.URL.Query().Get("next"); localPage(page) {
				next = page
			}
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(s.cookie()); err != nil || !equal(c.Value, s.session) {
			http.Error(w, "open the URL kubectl baton ui printed: it carries the token this console needs", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("Origin") != "http://"+r.Host {
			http.Error(w, "refused: the request did not come from this console's pages", http.StatusForbidden)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// cookie is the cookie's name. A browser sends a host's cookies to every port of the host, so
// each console's is named for its port (and kubectl baton ui listens on an address of its own
// where it can, so that no other local server is sent it).
func (s *Server) cookie() string { return "baton_console_" + s.port }

// loopback says whether host names this console: its address (or localhost, when that is
// 127.0.0.1) and its port.
func (s *Server) loopback(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil || port != s.port {
		return false
	}
	name = strings.ToLower(name)
	return name == s.host || name == "localhost" && s.host == "127.0.0.1"
}
