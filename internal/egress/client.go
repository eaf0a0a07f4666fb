package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxRedirects bounds the redirects followed within one origin.
const MaxRedirects = 5

// Client is an HTTP client whose every connection and redirect passes the policy.
func (p *Policy) Client() *http.Client {
	return &http.Client{Transport: p.Transport(), CheckRedirect: p.checkRedirect}
}

// Transport is http.DefaultTransport's settings with the policy's dialer. A proxy named by
// HTTPS_PROXY, HTTP_PROXY and NO_PROXY is the admin's and is reached whatever the rules say;
// the target of a proxied request is checked by its resolved addresses first (the proxy
// resolves it again: a name that changes its answer in between is the proxy's to refuse).
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = p.DialContext
	t.DialTLSContext = nil
	proxyFor := p.proxy.ProxyFunc()
	t.Proxy = func(req *http.Request) (*url.URL, error) {
		proxy, err := proxyFor(req.URL)
		if err != nil || proxy == nil {
			return proxy, err
		}
		if err := p.checkName(req.Context(), req.URL.Hostname()); err != nil {
			return nil, err
		}
		return proxy, nil
	}
	return t
}

// DialContext connects to addr if the policy allows the address it resolves to.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: p.resolver}
	if !p.HostAllowed(host) && !p.isProxy(addr) {
		d.Control = p.control
	}
	return d.DialContext(ctx, network, addr)
}

// control checks the address a connection is about to be made to: after resolution, for each
// address the dialer tries.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return p.refused(address, "not an IP address", false)
	}
	return p.Check(ap.Addr())
}

// isProxy says whether addr is a proxy the environment names, which the admin chose.
func (p *Policy) isProxy(addr string) bool {
	for _, v := range []string{p.proxy.HTTPSProxy, p.proxy.HTTPProxy} {
		if v != "" && !strings.Contains(v, "://") {
			v = "http://" + v
		}
		if u, err := url.Parse(v); err == nil && u.Host != "" && canonicalHostPort(u) == addr {
			return true
		}
	}
	return false
}

// checkName resolves a host and checks every address it has.
func (p *Policy) checkName(ctx context.Context, host string) error {
	if p.HostAllowed(host) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a)
	}
	r := p.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if err := p.Check(a); err != nil {
			return err
		}
	}
	return nil
}

// checkRedirect follows a redirect within the origin of the first request only, at most
// MaxRedirects times. A refusal returns no answer: the redirect's body is never read.
func (p *Policy) checkRedirect(req *http.Request, via []*http.Request) error {
	if Origin(req.URL) != Origin(via[0].URL) {
		return p.refused(Origin(req.URL), "a redirect from "+Origin(via[0].URL), true)
	}
	if len(via) > MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	return nil
}

// Origin is a URL's scheme, host and port, with the scheme's default port made explicit.
func Origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + canonicalHostPort(u)
}

func canonicalHostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
