package tools

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/baton-dev/baton/internal/textbound"
)

// Header values come from a Secret. They are sent to the server they are meant for and nowhere
// else, and they are cut out of everything the server says back before it reaches an error, a
// log line or a model.

// minSecretLen is the shortest header value that is redacted: shorter ones are too likely to
// be ordinary words or numbers in a result.
const minSecretLen = 6

// maxErrorBytes bounds the message of an error a client returns.
const maxErrorBytes = 2048

// redactor removes a server's header values from text.
type redactor []string

// newRedactor redacts each header value, and the credential after an auth scheme
// ("Bearer <token>"), which a server is as likely to quote alone.
func newRedactor(headers map[string]string) redactor {
	var r redactor
	for _, v := range headers {
		v = strings.TrimSpace(v)
		if len(v) >= minSecretLen {
			r = append(r, v)
		}
		if _, cred, ok := strings.Cut(v, " "); ok && len(strings.TrimSpace(cred)) >= minSecretLen {
			r = append(r, strings.TrimSpace(cred))
		}
	}
	// Longest first, so that a value is cut whole before a part of it is.
	slices.SortFunc(r, func(a, b string) int { return len(b) - len(a) })
	return r
}

// text redacts s.
func (r redactor) text(s string) string {
	for _, v := range r {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// json redacts the strings of a JSON document (keys too), and re-encodes it compactly when it
// changed; a document that does not parse is redacted as text.
func (r redactor) json(raw json.RawMessage) json.RawMessage {
	if len(r) == 0 || !r.within(string(raw)) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return json.RawMessage(r.text(string(raw)))
	}
	out, err := json.Marshal(r.walk(v))
	if err != nil {
		return json.RawMessage(r.text(string(raw)))
	}
	return out
}

// within reports whether s holds a value, as is or JSON-escaped.
func (r redactor) within(s string) bool {
	for _, v := range r {
		esc, _ := json.Marshal(v)
		if strings.Contains(s, v) || strings.Contains(s, string(esc[1:len(esc)-1])) {
			return true
		}
	}
	return false
}

func (r redactor) walk(v any) any {
	switch v := v.(type) {
	case string:
		return r.text(v)
	case []any:
		for i := range v {
			v[i] = r.walk(v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[r.text(k)] = r.walk(e)
		}
		return out
	}
	return v
}

// err redacts an error's message and bounds it; errors.Is and errors.As still see the cause.
func (r redactor) err(err error) error {
	if err == nil {
		return nil
	}
	msg := textbound.Bytes(strings.ToValidUTF8(r.text(err.Error()), "\uFFFD"), maxErrorBytes)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, cause: err}
}

// redactedError is an error whose message had header values removed.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// withHeaders adds a server's headers to the requests sent to the server's own scheme, host and
// port. A redirect elsewhere goes without them: the Secret is for that server alone.
type withHeaders struct {
	next    http.RoundTripper
	origin  string
	headers map[string]string
}

func newWithHeaders(next http.RoundTripper, serverURL string, headers map[string]string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &withHeaders{next: next, origin: origin(serverURL), headers: headers}
}

func (h *withHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.headers) == 0 || origin(req.URL.String()) != h.origin {
		return h.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	return h.next.RoundTrip(req)
}

// origin is a URL's scheme, host and port.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// clientWith is base with rt as its transport; base's timeout, redirect policy and cookie jar
// stay.
func clientWith(base *http.Client, rt func(http.RoundTripper) http.RoundTripper) *http.Client {
	if base == nil {
		base = http.DefaultClient
	}
	c := *base
	c.Transport = rt(base.Transport)
	return &c
}
