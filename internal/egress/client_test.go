package egress_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http/httpproxy"

	"github.com/baton-dev/baton/internal/egress"
	"github.com/baton-dev/baton/test/fakes"
)

// server is an HTTP server on one loopback address that counts the requests it was sent.
type server struct {
	*httptest.Server
	hits atomic.Int32
}

func serve(t *testing.T, ip string, h http.HandlerFunc) *server {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listening on %s: %v", ip, err)
	}
	s := &server{}
	s.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	})}}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }
}

func get(t *testing.T, c *http.Client, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func mustPolicy(t *testing.T, allow, deny []string) *egress.Policy {
	t.Helper()
	p, err := egress.New(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTheDefaultPolicyRefusesLoopback(t *testing.T) {
	s := serve(t, "127.0.0.1", answer("secret"))
	body, err := get(t, egress.Default().Client(), s.URL)
	if !egress.IsRefused(err) {
		t.Fatalf("GET %s = %q, %v; want a refusal", s.URL, body, err)
	}
	if !strings.Contains(err.Error(), "egress policy refuses 127.0.0.1 (loopback)") {
		t.Errorf("the error %q does not name the policy and the rule", err)
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server was sent %d requests, want none", n)
	}
	if body, err := get(t, egress.Loopback().Client(), s.URL); err != nil || body != "secret" {
		t.Errorf("with loopback allowed: %q, %v", body, err)
	}
}

func TestRedirectsStayInTheirOrigin(t *testing.T) {
	inside := serve(t, "127.0.0.2", answer("inside"))
	samePort := serve(t, "127.0.0.1", answer("another port"))
	tool := serve(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/inside":
			http.Redirect(w, r, inside.URL+"/latest/meta-data/", http.StatusFound)
		case "/port":
			http.Redirect(w, r, samePort.URL, http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusMovedPermanently)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "here")
		}
	})
	// The tool's own address is allowed, as an admin allows one in-cluster service.
	c := mustPolicy(t, []string{"127.0.0.1"}, nil).Client()

	body, err := get(t, c, tool.URL+"/inside")
	if !egress.IsRefused(err) || !strings.Contains(err.Error(), "refuses to follow a redirect to another origin") {
		t.Fatalf("a redirect to another address = %q, %v; want it refused", body, err)
	}
	if inside.hits.Load() != 0 {
		t.Errorf("the redirect's target was sent %d requests", inside.hits.Load())
	}
	if body, err = get(t, c, tool.URL+"/port"); !egress.IsRefused(err) {
		t.Fatalf("a redirect to another port of an allowed address = %q, %v; want it refused", body, err)
	}
	if samePort.hits.Load() != 0 {
		t.Errorf("the other port was sent %d requests", samePort.hits.Load())
	}
	if body, err = get(t, c, tool.URL+"/moved"); err != nil || body != "here" {
		t.Errorf("a redirect within the origin = %q, %v; want it followed", body, err)
	}
	before := tool.hits.Load()
	if _, err = get(t, c, tool.URL+"/loop"); err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Errorf("a redirect loop = %v; want it stopped", err)
	}
	if n := tool.hits.Load() - before; n != egress.MaxRedirects+1 {
		t.Errorf("a redirect loop sent %d requests, want %d", n, egress.MaxRedirects+1)
	}
}

func TestAddressesAreCheckedAfterResolution(t *testing.T) {
	s := serve(t, "127.0.0.2", answer("from 127.0.0.2"))
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	dns, err := fakes.NewDNS(map[string][]netip.Addr{
		"metadata.test":      {netip.MustParseAddr("169.254.169.254")},
		"rebind.test":        {netip.MustParseAddr("127.0.0.2")},
		"mixed.test":         {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.2")},
		"tools.allowed.test": {netip.MustParseAddr("127.0.0.2")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dns.Close() })
	c := mustPolicy(t, []string{"tools.allowed.test"}, nil).WithResolver(dns.Resolver()).Client()

	for _, host := range []string{"metadata.test", "rebind.test"} {
		if body, err := get(t, c, "http://"+net.JoinHostPort(host, port)); !egress.IsRefused(err) {
			t.Errorf("%s = %q, %v; want a refusal", host, body, err)
		}
	}
	if body, err := get(t, c, "http://"+net.JoinHostPort("metadata.test", port)); err == nil || !strings.Contains(err.Error(), "169.254.169.254 (link-local, cloud metadata)") {
		t.Errorf("a name of the metadata address = %q, %v; want its address and rule named", body, err)
	}
	// Of a name's addresses, only the allowed ones are tried.
	if body, err := get(t, mustPolicy(t, []string{"127.0.0.2"}, nil).WithResolver(dns.Resolver()).Client(),
		"http://"+net.JoinHostPort("mixed.test", port)); err != nil || body != "from 127.0.0.2" {
		t.Errorf("mixed.test with 127.0.0.2 allowed = %q, %v", body, err)
	}
	if s.hits.Load() != 1 {
		t.Errorf("the server was sent %d requests, want 1", s.hits.Load())
	}
	if body, err := get(t, c, "http://"+net.JoinHostPort("tools.allowed.test", port)); err != nil || body != "from 127.0.0.2" {
		t.Errorf("a host allowed by name = %q, %v; want it reached", body, err)
	}
}

func TestAProxyIsReachedAndTheTargetChecked(t *testing.T) {
	dns, err := fakes.NewDNS(map[string][]netip.Addr{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"public.test":   {netip.MustParseAddr("203.0.113.7")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dns.Close() })
	var asked atomic.Value
	proxy := serve(t, "127.0.0.3", func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.String())
		_, _ = io.WriteString(w, "proxied")
	})
	c := egress.Default().WithResolver(dns.Resolver()).WithProxy(&httpproxy.Config{HTTPProxy: proxy.URL}).Client()

	if body, err := get(t, c, "http://public.test/v1/models"); err != nil || body != "proxied" {
		t.Fatalf("through the proxy = %q, %v", body, err)
	}
	if got := asked.Load(); got != "http://public.test/v1/models" {
		t.Errorf("the proxy was asked for %v", got)
	}
	if body, err := get(t, c, "http://metadata.test/latest/"); !egress.IsRefused(err) {
		t.Errorf("the metadata address through the proxy = %q, %v; want a refusal", body, err)
	}
	if proxy.hits.Load() != 1 {
		t.Errorf("the proxy was sent %d requests, want 1", proxy.hits.Load())
	}
}
