package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/utils/clock"

	"github.com/baton-dev/baton/api/v1alpha1"
)

// Bounds of a server's tool list: a broken or hostile server cannot page forever.
const (
	maxListPages = 50
	maxTools     = 1000
)

// mcpClient speaks to one MCP server over streamable HTTP, through one session at a time. The
// session is opened at first use, and opened again at the next use after it broke: the
// server restarted, or said it no longer knows the session.
type mcpClient struct {
	server  string
	url     string
	http    *http.Client
	timeout time.Duration
	listTTL time.Duration
	clock   clock.PassiveClock
	redact  redactor
	mcp     *mcp.Client

	// connecting and listing are held by the one caller that opens a session or lists tools;
	// the others wait for its outcome (or their context).
	connecting chan struct{}
	listing    chan struct{}

	mu     sync.Mutex
	closed bool
	sess   *session
	list   *toolList
	// gen counts the events that make a tool list stale: a new session, a list_changed
	// notification.
	gen uint64
	// listed counts the lists made.
	listed uint64
}

// session is one MCP session. broken is set once it cannot be used again.
type session struct {
	cs     *mcp.ClientSession
	broken atomic.Bool
}

func newMCPClient(opts Options, server v1alpha1.ToolServer, headers map[string]string) *mcpClient {
	spec := server.MCP
	m := &mcpClient{
		server:     server.Name,
		url:        spec.URL,
		timeout:    callTimeout(spec.Timeout),
		listTTL:    opts.ListTTL,
		clock:      opts.Clock,
		redact:     newRedactor(headers),
		connecting: make(chan struct{}, 1),
		listing:    make(chan struct{}, 1),
	}
	m.http = clientWith(opts.HTTPClient, func(next http.RoundTripper) http.RoundTripper {
		return newWithHeaders(next, spec.URL, headers)
	})
	// A session keeps a stream open for the server's notifications: an overall client timeout
	// would cut it. Each exchange has its own deadline instead.
	m.http.Timeout = 0
	m.mcp = mcp.NewClient(&mcp.Implementation{Name: "baton", Version: opts.Version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { m.stale() },
	})
	return m
}

// Tools lists the server's tools: from the cache while it is fresh.
func (m *mcpClient) Tools(ctx context.Context) ([]Tool, error) {
	l, err := m.tools(ctx, 0)
	if err != nil {
		return nil, err
	}
	return append([]Tool(nil), l.tools...), nil
}

// Call calls a tool, with the call's idempotency key in the request's _meta. The server's
// timeout bounds all of it: opening a session, listing the tools for the output schema, the
// call itself.
func (m *mcpClient) Call(ctx context.Context, call Call) (Result, error) {
	args, err := objectArguments(call.Arguments)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	// The tool's output schema, from the list; a tool the list does not know may be new.
	m.mu.Lock()
	listed := m.listed
	m.mu.Unlock()
	l, err := m.tools(ctx, 0)
	if err != nil {
		return Result{}, err
	}
	if _, known := l.schemas[call.Tool]; !known && l.seq <= listed {
		if l, err = m.tools(ctx, listed); err != nil {
			return Result{}, err
		}
	}
	params := &mcp.CallToolParams{Name: call.Tool, Arguments: args}
	if call.IdempotencyKey != "" {
		params.Meta = mcp.Meta{IdempotencyMetaKey: call.IdempotencyKey}
	}
	var res *mcp.CallToolResult
	err = m.do(ctx, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.CallTool(ctx, params)
		return err
	})
	var rpc *jsonrpc.Error
	var connecting *connectError
	switch {
	case errors.As(err, &rpc) && !errors.As(err, &connecting):
		return Result{}, m.redact.err(fmt.Errorf("MCP server %s refused the call of %s: %s (code %d)", m.server, call.Tool, rpc.Message, rpc.Code))
	case err != nil:
		return Result{}, m.redact.err(fmt.Errorf("calling %s on MCP server %s: %w", call.Tool, m.server, err))
	}
	return resultOf(res, l.schemas[call.Tool], m.redact), nil
}

// close ends the session; the client refuses later uses.
func (m *mcpClient) close() {
	m.mu.Lock()
	s := m.sess
	m.closed, m.sess = true, nil
	m.mu.Unlock()
	if s != nil {
		_ = s.cs.Close()
	}
}

// stale marks the tool list as out of date: the server said it changed.
func (m *mcpClient) stale() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
}

// tools is the server's tool list: the cached one while it is fresh, nothing made it stale and
// it is newer than the list numbered after; else a new one.
func (m *mcpClient) tools(ctx context.Context, after uint64) (*toolList, error) {
	fresh := func() *toolList {
		m.mu.Lock()
		defer m.mu.Unlock()
		if l := m.list; l != nil && l.gen == m.gen && l.seq > after && m.clock.Since(l.at) < m.listTTL {
			return l
		}
		return nil
	}
	if l := fresh(); l != nil {
		return l, nil
	}
	if err := acquire(ctx, m.listing); err != nil {
		return nil, err
	}
	defer func() { <-m.listing }()
	// Whoever held the lock before may have made the list already.
	if l := fresh(); l != nil {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var listed []*mcp.Tool
	var gen uint64
	err := m.do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
		m.mu.Lock()
		gen = m.gen
		m.mu.Unlock()
		listed = nil
		params := &mcp.ListToolsParams{}
		for page := 1; ; page++ {
			res, err := cs.ListTools(ctx, params)
			if err != nil {
				return err
			}
			listed = append(listed, res.Tools...)
			switch {
			case res.NextCursor == "":
				return nil
			case page == maxListPages || len(listed) > maxTools:
				return fmt.Errorf("the server lists more than %d tools or %d pages", maxTools, maxListPages)
			}
			params = &mcp.ListToolsParams{Cursor: res.NextCursor}
		}
	})
	if err != nil {
		return nil, m.redact.err(fmt.Errorf("listing the tools of MCP server %s: %w", m.server, err))
	}
	l := newToolList(ctx, m.server, listed, m.redact)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listed++
	l.at, l.gen, l.seq = m.clock.Now(), gen, m.listed
	m.list = l
	return l, nil
}

// do runs one exchange on the session, opening one first when there is none or it broke. When
// the exchange fails because the server refused the session (it restarted and forgot it), or
// before anything was sent, it runs once more on a new session: the server ran nothing.
func (m *mcpClient) do(ctx context.Context, exchange func(context.Context, *mcp.ClientSession) error) error {
	for attempt := 1; ; attempt++ {
		s, err := m.session(ctx)
		if err != nil {
			return err
		}
		track := &tracked{}
		err = exchange(context.WithValue(ctx, trackedKey{}, track), s.cs)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if track.refused.Load() || !track.sent.Load() {
			s.broken.Store(true)
			if attempt == 1 {
				continue
			}
		}
		return err
	}
}

// session is the client's session, opened now if there is none or it broke.
func (m *mcpClient) session(ctx context.Context) (*session, error) {
	if err := acquire(ctx, m.connecting); err != nil {
		return nil, err
	}
	defer func() { <-m.connecting }()
	m.mu.Lock()
	old, closed := m.sess, m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if old != nil && !old.broken.Load() {
		return old, nil
	}
	if old != nil {
		m.mu.Lock()
		if m.sess == old {
			m.sess = nil
		}
		m.mu.Unlock()
		// Its end (a DELETE the server may never answer) is none of this call's business.
		go func() { _ = old.cs.Close() }()
	}
	s := &session{}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   m.url,
		HTTPClient: clientWith(m.http, func(next http.RoundTripper) http.RoundTripper { return watch{next: next, s: s} }),
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cs, err := m.mcp.Connect(ctx, transport, nil)
	if err != nil {
		return nil, m.redact.err(&connectError{server: m.server, err: err})
	}
	s.cs = cs
	go func() {
		_ = cs.Wait()
		s.broken.Store(true)
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		go func() { _ = cs.Close() }()
		return nil, ErrClosed
	}
	// A new session may meet a new server: its tools are listed again.
	m.sess = s
	m.gen++
	return s, nil
}

// connectError is a failure to open a session.
type connectError struct {
	server string
	err    error
}

func (e *connectError) Error() string {
	return "connecting to MCP server " + e.server + ": " + e.err.Error()
}
func (e *connectError) Unwrap() error { return e.err }

// tracked is what the transport saw of one exchange.
type tracked struct {
	// sent is set once a request of the exchange went out.
	sent atomic.Bool
	// refused is set when the server answered a request of the session with 400 or 404: it
	// does not know the session, and ran nothing.
	refused atomic.Bool
}

type trackedKey struct{}

// watch sees each request of a session: a POST the server refuses breaks the session. Only
// POSTs count: some servers answer the optional standalone GET stream with 400 or 404 for
// sessions they know.
type watch struct {
	next http.RoundTripper
	s    *session
}

func (w watch) RoundTrip(req *http.Request) (*http.Response, error) {
	track, _ := req.Context().Value(trackedKey{}).(*tracked)
	if track != nil && req.Method == http.MethodPost {
		track.sent.Store(true)
	}
	resp, err := w.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") != "" &&
		(resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest) {
		w.s.broken.Store(true)
		if track != nil {
			track.refused.Store(true)
		}
	}
	return resp, err
}

// acquire takes a one-slot lock, or gives up with ctx.
func acquire(ctx context.Context, lock chan struct{}) error {
	select {
	case lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// objectArguments are a call's arguments as JSON: an object, {} when empty.
func objectArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("the arguments are not a JSON object")
	}
	return raw, nil
}
