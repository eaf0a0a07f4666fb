package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Defaults of a Pool.
const (
	// DefaultListTTL is how long a server's tool list is used before it is asked again, when
	// the server does not say it changed.
	DefaultListTTL = 5 * time.Minute
	// DefaultCallTimeout bounds one call when the server's spec sets no timeout.
	DefaultCallTimeout = 30 * time.Second
	// idleTimeout is how long a client may go unused before the pool closes it.
	idleTimeout = 10 * time.Minute
)

// ErrClosed is the error of a client the pool has closed: ask the pool again.
var ErrClosed = errors.New("tool client closed")

// Options configure a Pool.
type Options struct {
	// HTTPClient makes every request, to MCP servers and HTTP tools alike. It is expected to
	// retry transient failures (429, 5xx, a connection that failed) already. Default:
	// http.DefaultClient.
	HTTPClient *http.Client
	// ListTTL is how long a tool list is used before it is asked again. Default: DefaultListTTL.
	ListTTL time.Duration
	// Version is the operator's version, given to MCP servers with the client's name.
	Version string
	// Clock tells the time of tool list expiry and idle clients. Default: the real clock.
	Clock clock.WithTicker
}

// Pool hands out one client per tool server in use, shared by every run whose config uses the
// same server with the same URL, spec and headers. A client unused for ten minutes is closed.
type Pool struct {
	opts Options
	stop chan struct{}

	mu      sync.Mutex
	closed  bool
	clients map[poolKey]*entry
}

// poolKey identifies a client. Header values never appear in it, only their digest.
type poolKey struct {
	namespace, name, url string
	// spec is a digest of the server's spec (timeout, schemas, ...), so that a changed spec
	// gets a client of its own.
	spec string
	// headers is a digest of the header names and values.
	headers string
}

// entry is a client in the pool.
type entry struct {
	client   closer
	clock    clock.PassiveClock
	lastUsed atomic.Int64 // unix nanoseconds
	inFlight atomic.Int32
	closed   atomic.Bool
}

// closer is a Client the pool can close.
type closer interface {
	Client
	close()
}

// NewPool makes a pool. Close it when done.
func NewPool(opts Options) *Pool {
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.ListTTL <= 0 {
		opts.ListTTL = DefaultListTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	p := &Pool{opts: opts, stop: make(chan struct{}), clients: map[poolKey]*entry{}}
	go p.closeIdle(opts.Clock.NewTicker(time.Minute))
	return p
}

// Client is the client of a config's tool server. headers are the request headers read from
// the server's headersFrom Secret (nil without one); their values are sent to the server and
// redacted from everything the client returns. Ask the pool for the client at each use rather
// than keeping it: a client left unused for ten minutes is closed.
func (p *Pool) Client(ctx context.Context, namespace string, server v1alpha1.ToolServer, headers map[string]string) (Client, error) {
	headers, err := cleanHeaders(server.Name, headers)
	if err != nil {
		return nil, err
	}
	key, err := keyOf(namespace, server, headers)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("tool server %s: %w: the pool is closed", server.Name, ErrClosed)
	}
	now := p.opts.Clock.Now().UnixNano()
	if e, ok := p.clients[key]; ok {
		e.lastUsed.Store(now)
		return pooled{e}, nil
	}
	var c closer
	switch {
	case server.MCP != nil:
		c = newMCPClient(p.opts, server, headers)
	case server.HTTP != nil:
		if c, err = newHTTPClient(p.opts, server, headers); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("tool server %s sets neither mcp nor http", server.Name)
	}
	e := &entry{client: c, clock: p.opts.Clock}
	e.lastUsed.Store(now)
	p.clients[key] = e
	log.FromContext(ctx).V(2).Info("Tool client created", "server", server.Name, "namespace", namespace,
		"host", hostOf(key.url), "headers", len(headers))
	return pooled{e}, nil
}

// Close closes every client; the pool hands out no more.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	// Each close may wait a few seconds for its server to end the session: all at once.
	var wg sync.WaitGroup
	for _, e := range clients {
		e.closed.Store(true)
		wg.Go(e.client.close)
	}
	wg.Wait()
}

// closeIdle closes clients unused for idleTimeout, every minute, until the pool is closed.
func (p *Pool) closeIdle(tick clock.Ticker) {
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C():
			p.sweep()
		}
	}
}

// sweep closes the clients unused for idleTimeout that have no call in flight.
func (p *Pool) sweep() {
	cutoff := p.opts.Clock.Now().Add(-idleTimeout).UnixNano()
	var idle []*entry
	p.mu.Lock()
	for k, e := range p.clients {
		if e.inFlight.Load() != 0 || e.lastUsed.Load() >= cutoff {
			continue
		}
		// Refuse new uses first, then look again: a use that began meanwhile keeps it.
		e.closed.Store(true)
		if e.inFlight.Load() != 0 {
			e.closed.Store(false)
			continue
		}
		idle = append(idle, e)
		delete(p.clients, k)
	}
	p.mu.Unlock()
	for _, e := range idle {
		go e.client.close()
	}
}

// pooled is a pool's client as callers get it: each use counts as the client's last.
type pooled struct{ e *entry }

func (c pooled) Tools(ctx context.Context) ([]Tool, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.e.inFlight.Add(-1)
	return c.e.client.Tools(ctx)
}

func (c pooled) Call(ctx context.Context, call Call) (Result, error) {
	if err := c.begin(); err != nil {
		return Result{}, err
	}
	defer c.e.inFlight.Add(-1)
	return c.e.client.Call(ctx, call)
}

func (c pooled) begin() error {
	c.e.inFlight.Add(1)
	if c.e.closed.Load() {
		c.e.inFlight.Add(-1)
		return ErrClosed
	}
	c.e.lastUsed.Store(c.e.clock.Now().UnixNano())
	return nil
}

// cleanHeaders trims header values (a Secret made with `echo token | kubectl create secret`
// ends in a newline) and refuses names and values HTTP cannot carry. Errors name the key, never
// the value.
func cleanHeaders(server string, headers map[string]string) (map[string]string, error) {
	if len(headers) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(headers))
	for name, value := range headers {
		value = strings.TrimSpace(value)
		if !validHeaderName(name) {
			return nil, fmt.Errorf("tool server %s: the Secret's key %q is not an HTTP header name", server, name)
		}
		if strings.ContainsFunc(value, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
			return nil, fmt.Errorf("tool server %s: the Secret's value for header %q holds control characters", server, name)
		}
		out[name] = value
	}
	return out, nil
}

// validHeaderName reports whether name is an HTTP token (RFC 9110, section 5.6.2).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("!#$%&'*+-.^_`|~", r) {
			return false
		}
	}
	return true
}

// keyOf is the pool key of a server: never its header values, only their digest.
func keyOf(namespace string, server v1alpha1.ToolServer, headers map[string]string) (poolKey, error) {
	k := poolKey{namespace: namespace, name: server.Name}
	switch {
	case server.MCP != nil:
		k.url = server.MCP.URL
	case server.HTTP != nil:
		k.url = server.HTTP.URL
	}
	spec, err := json.Marshal(server)
	if err != nil {
		return k, err
	}
	k.spec = digest(spec)
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		// Lengths first, so that no two different header sets write the same bytes.
		_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(headers[name]), headers[name])
	}
	k.headers = hex.EncodeToString(h.Sum(nil)[:16])
	return k, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// callTimeout is a server's per-call timeout.
func callTimeout(d *v1alpha1.Duration) time.Duration {
	if t := d.OrZero(); t > 0 {
		return t
	}
	return DefaultCallTimeout
}
