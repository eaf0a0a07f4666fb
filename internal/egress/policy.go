// Package egress is the policy every outbound call the operator makes for a config goes
// through: model servers, HTTP agents, HTTP and MCP tools. The cluster admin sets it with the
// manager's --egress-allow and --egress-deny; a config's author cannot widen it.
//
// Addresses are checked as the connection is made, after DNS resolution, so a name that
// resolves to a refused address (or starts to, between two lookups) is refused too. Redirects
// to another origin are not followed, and those within one origin are bounded.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/net/http/httpproxy"
)

// Defaults are the addresses refused unless the admin allows them: loopback, "this host",
// link-local (which holds the metadata services of AWS, GCP, Azure and OpenStack at
// 169.254.169.254, and ECS's at 169.254.170.2), and the metadata addresses outside it.
var Defaults = []Rule{
	{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Why: "loopback"},
	{Prefix: netip.MustParsePrefix("::1/128"), Why: "loopback"},
	{Prefix: netip.MustParsePrefix("0.0.0.0/8"), Why: "this host"},
	{Prefix: netip.MustParsePrefix("::/128"), Why: "this host"},
	{Prefix: netip.MustParsePrefix("169.254.0.0/16"), Why: "link-local, cloud metadata"},
	{Prefix: netip.MustParsePrefix("fe80::/10"), Why: "link-local"},
	{Prefix: netip.MustParsePrefix("fd00:ec2::254/128"), Why: "cloud metadata"},
	{Prefix: netip.MustParsePrefix("100.100.100.200/32"), Why: "cloud metadata"},
	{Prefix: netip.MustParsePrefix("168.63.129.16/32"), Why: "cloud metadata"},
}

// Rule allows or refuses the addresses of a prefix.
type Rule struct {
	Prefix netip.Prefix
	Allow  bool
	// Why is said when the rule refuses a call: "loopback", "--egress-deny".
	Why string
	// admin is set on the admin's rules, which win over the defaults at the same length.
	admin bool
}

// over says whether r decides over s, both holding an address.
func (r Rule) over(s Rule) bool {
	if r.Prefix.Bits() != s.Prefix.Bits() {
		return r.Prefix.Bits() > s.Prefix.Bits()
	}
	if r.admin != s.admin {
		return r.admin
	}
	return !r.Allow && s.Allow
}

// Policy decides which addresses calls may reach. Of the rules that hold an address, the one
// with the longest prefix decides; at the same length the admin's rule wins over a default, and
// a refusal over an allowance: --egress-allow=10.96.12.7/32 opens one service inside a denied
// 10.96.0.0/12, --egress-allow=127.0.0.0/8 opens loopback, while --egress-allow=0.0.0.0/0
// leaves the metadata addresses refused. Hosts allowed by name are not checked at all.
type Policy struct {
	rules []Rule
	// hosts are the names allowed whatever they resolve to; a leading "*." allows every
	// name under the domain.
	hosts []string
	// resolver looks names up (nil: the system's).
	resolver *net.Resolver
	// proxy is the proxy configuration of the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
	proxy *httpproxy.Config
	// owner names the policy in its refusals; the operator's when unset.
	owner *Owner
}

// Owner names a policy in its refusals: whose it is, and how more is allowed.
type Owner struct {
	Whose, Remedy string
}

// operator is the owner of the operator's policy.
var operator = Owner{Whose: "the operator's", Remedy: "a cluster admin can allow it with --egress-allow"}

// OwnedBy is the policy, named as owner's in its refusals.
func (p *Policy) OwnedBy(owner Owner) *Policy {
	c := *p
	c.owner = &owner
	return &c
}

// refused is the refusal of address, for why.
func (p *Policy) refused(address, why string, redirect bool) *Refused {
	owner := operator
	if p.owner != nil {
		owner = *p.owner
	}
	return &Refused{Address: address, Why: why, Redirect: redirect, Owner: owner}
}

// WithProxy is the policy with requests sent through the proxies of cfg rather than those the
// environment names.
func (p *Policy) WithProxy(cfg *httpproxy.Config) *Policy {
	c := *p
	c.proxy = cfg
	return &c
}

// WithResolver is the policy with names looked up by r: a DNS server of the tests'.
func (p *Policy) WithResolver(r *net.Resolver) *Policy {
	c := *p
	c.resolver = r
	return &c
}

// New is the default policy with the admin's additions: allow holds CIDRs, addresses and host
// names ("tools.example.com", "*.svc.cluster.local"), deny CIDRs and addresses.
func New(allow, deny []string) (*Policy, error) {
	p := &Policy{rules: slices.Clone(Defaults), proxy: httpproxy.FromEnvironment()}
	for _, s := range allow {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if prefix, err := parsePrefix(s); err == nil {
			p.rules = append(p.rules, Rule{Prefix: prefix, Allow: true, admin: true})
			continue
		}
		host, err := parseHost(s)
		if err != nil {
			return nil, fmt.Errorf("--egress-allow %q: %w", s, err)
		}
		p.hosts = append(p.hosts, host)
	}
	for _, s := range deny {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		prefix, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--egress-deny %q: a CIDR or an IP address is expected", s)
		}
		p.rules = append(p.rules, Rule{Prefix: prefix, Why: "--egress-deny", admin: true})
	}
	return p, nil
}

// Default is the policy with nothing added.
func Default() *Policy {
	p, _ := New(nil, nil)
	return p
}

// Loopback is the default policy with the loopback addresses allowed: for an operator whose
// model servers and tools run on its own host, as the quickstart's and the tests' fakes do.
func Loopback() *Policy {
	p, _ := New([]string{"127.0.0.0/8", "::1"}, nil)
	return p
}

// parsePrefix reads a CIDR, or one address as a prefix of its own.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// unmappedBits is a prefix's length once its address is unmapped from IPv6 (::ffff:a.b.c.d/120
// is a.b.c.d/24).
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// parseHost checks a host name: DNS labels, optionally below "*.".
func parseHost(s string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if len(name) > 253 {
		return "", errors.New("a host name is at most 253 characters")
	}
	labels := strings.Split(strings.TrimPrefix(name, "*."), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") ||
			strings.IndexFunc(l, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' }) >= 0 {
			return "", errors.New("a CIDR, an IP address or a host name (optionally *.domain) is expected")
		}
	}
	return name, nil
}

// HostAllowed says whether a host name is allowed by name, whatever it resolves to.
func (p *Policy) HostAllowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.hosts {
		if h == host || strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]) {
			return true
		}
	}
	return false
}

// Check says whether an address may be reached: nil, or a *Refused naming the rule. An IPv6
// address that embeds an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible or -translated) is
// refused if it or the IPv4 address is: allowing the IPv6 form does not open what it embeds.
func (p *Policy) Check(addr netip.Addr) error {
	a := addr.Unmap().WithZone("")
	for _, r := range reaches(a) {
		rule, refused := p.decide(r)
		if !refused {
			continue
		}
		where := r.String()
		if r != a {
			where += ", embedded in " + a.String()
		}
		return p.refused(where, rule.Why, false)
	}
	return nil
}

// decide is the rule that decides over address a, and whether it refuses it.
func (p *Policy) decide(a netip.Addr) (Rule, bool) {
	best, found := Rule{}, false
	for _, r := range p.rules {
		if !r.Prefix.Contains(a) {
			continue
		}
		if !found || r.over(best) {
			best, found = r, true
		}
	}
	return best, found && !best.Allow
}

// Refused is the error of a call the policy does not allow. Its message names the policy and
// what it refused, never anything the address answered.
type Refused struct {
	// Address is the refused address, or the redirect's target.
	Address string
	// Why names the rule: "loopback", "--egress-deny", "a redirect from https://a.example:443".
	Why string
	// Redirect is set when the policy refused to follow a redirect to another origin.
	Redirect bool
	// Owner names the policy (the operator's when unset).
	Owner Owner
}

func (r *Refused) Error() string {
	owner := r.Owner
	if owner.Whose == "" {
		owner = operator
	}
	if r.Redirect {
		return fmt.Sprintf("%s egress policy refuses to follow a redirect to another origin: to %s (%s)", owner.Whose, r.Address, r.Why)
	}
	return fmt.Sprintf("%s egress policy refuses %s (%s); %s", owner.Whose, r.Address, r.Why, owner.Remedy)
}

// IsRefused says whether err is, or wraps, a refusal of the policy.
func IsRefused(err error) bool {
	var r *Refused
	return errors.As(err, &r)
}
