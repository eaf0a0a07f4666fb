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
		// IPv6 forms that a translator or a tunnel on the path delivers to an IPv4 address are
		// judged as that address too.
		{name: "the metadata address mapped into IPv6 is refused", addr: "::ffff:169.254.169.254", refused: "link-local, cloud metadata"},
		{name: "the metadata address as IPv4-translated (SIIT) is refused", addr: "::ffff:0:a9fe:a9fe", refused: "link-local, cloud metadata"},
		{name: "the metadata address as IPv4-compatible is refused", addr: "::169.254.169.254", refused: "link-local, cloud metadata"},
		{name: "loopback as IPv4-compatible is refused", addr: "::127.0.0.1", refused: "loopback"},
		{name: "a public address as IPv4-compatible is allowed", addr: "::203.0.113.7"},
		{name: "the metadata address through local-use NAT64 of length 96 is refused", addr: "64:ff9b:1::a9fe:a9fe", refused: "link-local, cloud metadata"},
		{name: "the metadata address through local-use NAT64 of length 64 is refused", addr: "64:ff9b:1:0:a9:fea9:fe00:0", refused: "link-local, cloud metadata"},
		{name: "the metadata address through local-use NAT64 of length 56 is refused", addr: "64:ff9b:1:a9:fe:a9fe::", refused: "link-local, cloud metadata"},
		{name: "the metadata address through local-use NAT64 of length 48 is refused", addr: "64:ff9b:1:a9fe:a9:fe00::", refused: "link-local, cloud metadata"},
		{name: "loopback through local-use NAT64 is refused", addr: "64:ff9b:1::7f00:1", refused: "loopback"},
		{name: "a public address through local-use NAT64 of length 96 is allowed", addr: "64:ff9b:1::cb00:7107"},
		{name: "a public address through local-use NAT64 of length 48 is allowed", addr: "64:ff9b:1:cb00:71:700::"},
		{name: "the metadata address in 6to4 is refused", addr: "2002:a9fe:a9fe::", refused: "link-local, cloud metadata"},
		{name: "loopback in 6to4 is refused", addr: "2002:7f00:1::1", refused: "loopback"},
		{name: "a public address in 6to4 is allowed", addr: "2002:cb00:7107::1"},
		{name: "the metadata address as a Teredo client is refused", addr: "2001:0:4136:e378:8000:63bf:5601:5601", refused: "link-local, cloud metadata"},
		{name: "a Teredo address of public server and client is allowed", addr: "2001:0:4136:e378:8000:63bf:3fff:fdd2"},
		{name: "an admin's deny of the NAT64 prefix refuses what it translates", deny: []string{"64:ff9b::/96"}, addr: "64:ff9b::cb00:7107", refused: "--egress-deny"},
		{name: "an admin's deny of an IPv4 range refuses it through NAT64", deny: []string{"10.0.0.0/8"}, addr: "64:ff9b::a00:1", refused: "--egress-deny"},
		{name: "allowing the IPv6 form leaves the metadata address it embeds refused", allow: []string{"64:ff9b::/96", "2002::/16"}, addr: "2002:a9fe:a9fe::", refused: "link-local, cloud metadata"},
		{name: "allowing an IPv4 address opens its NAT64 form", allow: []string{"127.0.0.1"}, addr: "64:ff9b::7f00:1"},
		{name: "allowing IPv6 loopback opens it, though it looks IPv4-compatible", allow: []string{"::1"}, addr: "::1"},
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
			case c.refused != "" && !strings.Contains(err.Error(), netip.MustParseAddr(c.addr).WithZone("").Unmap().String()):
				t.Fatalf("Check(%s) = %q, which does not name the address called", c.addr, err)
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

// Every IPv6 form of an IPv4 address the policy refuses is refused too, whichever rule
// refuses it: the defaults' metadata, loopback and link-local addresses, and an admin's deny.
func TestEveryIPv6FormOfARefusedIPv4AddressIsRefused(t *testing.T) {
	p, err := egress.New([]string{"0.0.0.0/0", "::/0"}, []string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v4 := range []string{"169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16", "127.0.0.1", "127.9.8.7", "10.96.0.1"} {
		if p.Check(netip.MustParseAddr(v4)) == nil {
			t.Fatalf("%s is allowed: the test needs refused addresses", v4)
		}
		for form, addr := range ipv6Forms(netip.MustParseAddr(v4).As4()) {
			if err := p.Check(addr); err == nil || !egress.IsRefused(err) {
				t.Errorf("%s as %s (%s) is allowed", v4, form, addr)
			}
		}
	}
}

// ipv6Forms are the IPv6 addresses that carry v4, by the name of their form.
func ipv6Forms(v4 [4]byte) map[string]netip.Addr {
	form := func(prefix string, at ...int) netip.Addr {
		b := netip.MustParseAddr(prefix).As16()
		for i, j := range at {
			b[j] = v4[i]
		}
		return netip.AddrFrom16(b)
	}
	teredo := form("2001:0:4136:e378:8000:63bf::", 12, 13, 14, 15).As16()
	for i := 12; i < 16; i++ {
		teredo[i] = ^teredo[i]
	}
	return map[string]netip.Addr{
		"IPv4-mapped":                 form("::ffff:0:0", 12, 13, 14, 15),
		"IPv4-translated":             form("::ffff:0:0:0", 12, 13, 14, 15),
		"IPv4-compatible":             form("::", 12, 13, 14, 15),
		"NAT64":                       form("64:ff9b::", 12, 13, 14, 15),
		"local-use NAT64, length 96":  form("64:ff9b:1::", 12, 13, 14, 15),
		"local-use NAT64, length 64":  form("64:ff9b:1::", 9, 10, 11, 12),
		"local-use NAT64, length 56":  form("64:ff9b:1::", 7, 9, 10, 11),
		"local-use NAT64, length 48":  form("64:ff9b:1::", 6, 7, 9, 10),
		"6to4":                        form("2002::", 2, 3, 4, 5),
		"6to4 with a subnet and host": form("2002:0:0:7::1", 2, 3, 4, 5),
		"a Teredo client":             netip.AddrFrom16(teredo),
	}
}
