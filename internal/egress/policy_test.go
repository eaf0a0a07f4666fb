package egress_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/baton-dev/baton/internal/egress"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name        string
		allow, deny []string
		addr        string
		refused     string // the rule named, "" when allowed
	}{
		{name: "a public address is allowed", addr: "203.0.113.7"},
		{name: "a public IPv6 address is allowed", addr: "2001:db8::7"},
		{name: "loopback is refused", addr: "127.0.0.1", refused: "loopback"},
		{name: "all of 127/8 is loopback", addr: "127.1.2.3", refused: "loopback"},
		{name: "IPv6 loopback is refused", addr: "::1", refused: "loopback"},
		{name: "loopback mapped into IPv6 is refused", addr: "::ffff:127.0.0.1", refused: "loopback"},
		{name: "0.0.0.0 reaches this host and is refused", addr: "0.0.0.0", refused: "this host"},
		{name: "the metadata address is refused", addr: "169.254.169.254", refused: "link-local, cloud metadata"},
		{name: "the metadata address through NAT64 is refused", addr: "64:ff9b::a9fe:a9fe", refused: "link-local, cloud metadata"},
		{name: "AWS's IPv6 metadata address is refused", addr: "fd00:ec2::254", refused: "cloud metadata"},
		{name: "IPv6 link-local with a zone is refused", addr: "fe80::1%eth0", refused: "link-local"},
		{name: "Alibaba's metadata address is refused", addr: "100.100.100.200", refused: "cloud metadata"},
		{name: "an admin's deny refuses", deny: []string{"10.0.0.0/8"}, addr: "10.96.0.1", refused: "--egress-deny"},
		{name: "an admin's deny of one address refuses", deny: []string{"192.0.2.1"}, addr: "192.0.2.1", refused: "--egress-deny"},
		{name: "an allowed service inside a denied range is allowed", allow: []string{"10.96.12.7/32"}, deny: []string{"10.96.0.0/12"}, addr: "10.96.12.7"},
		{name: "its neighbour stays refused", allow: []string{"10.96.12.7/32"}, deny: []string{"10.96.0.0/12"}, addr: "10.96.12.8", refused: "--egress-deny"},
		{name: "allowing loopback opens it", allow: []string{"127.0.0.1"}, addr: "127.0.0.1"},
		{name: "allowing one loopback address leaves the others refused", allow: []string{"127.0.0.1"}, addr: "127.0.0.2", refused: "loopback"},
		{name: "allowing everything leaves the metadata address refused", allow: []string{"0.0.0.0/0"}, addr: "169.254.169.254", refused: "link-local, cloud metadata"},
		{name: "a deny as long as an allow wins", allow: []string{"10.0.0.0/8"}, deny: []string{"10.0.0.0/8"}, addr: "10.1.1.1", refused: "--egress-deny"},
		{name: "a mapped CIDR is read as IPv4", deny: []string{"::ffff:198.51.100.0/120"}, addr: "198.51.100.9", refused: "--egress-deny"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := egress.New(c.allow, c.deny)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Check(netip.MustParseAddr(c.addr))
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("Check(%s) = %v, want allowed", c.addr, err)
			case c.refused != "" && err == nil:
				t.Fatalf("Check(%s) allowed, want refused (%s)", c.addr, c.refused)
			case c.refused != "" && !strings.Contains(err.Error(), "("+c.refused+")"):
				t.Fatalf("Check(%s) = %q, want the rule %q named", c.addr, err, c.refused)
			case c.refused != "" && !egress.IsRefused(err):
				t.Fatalf("Check(%s) = %T, want a *Refused", c.addr, err)
			}
		})
	}
}

func TestNewRefusesWhatItCannotRead(t *testing.T) {
	cases := []struct {
		name        string
		allow, deny []string
		want        string
	}{
		{name: "a deny must be an address", deny: []string{"example.com"}, want: `--egress-deny "example.com": a CIDR or an IP address is expected`},
		{name: "a bad CIDR", deny: []string{"10.0.0.0/33"}, want: `--egress-deny "10.0.0.0/33"`},
		{name: "a host name with a space", allow: []string{"bad host"}, want: `--egress-allow "bad host": a CIDR, an IP address or a host name`},
		{name: "a wildcard inside a name", allow: []string{"a.*.example.com"}, want: `--egress-allow "a.*.example.com"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := egress.New(c.allow, c.deny)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	p, err := egress.New([]string{"tools.example.com", "*.svc.cluster.local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"tools.example.com":                  true,
		"TOOLS.example.com.":                 true,
		"other.example.com":                  false,
		"search.tools.svc.cluster.local":     true,
		"svc.cluster.local":                  false,
		"evilsvc.cluster.local":              false,
		"tools.example.com.attacker.example": false,
	} {
		if got := p.HostAllowed(host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}
