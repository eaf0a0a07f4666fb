package egress

import "net/netip"

// IPv6 forms that carry an IPv4 address, whose packets a translator or a tunnel on the path
// delivers to that IPv4 address: the metadata service is as near at 64:ff9b::a9fe:a9fe, or at
// 2002:a9fe:a9fe::, as at 169.254.169.254. (IPv4-mapped ::ffff:0:0/96 is unmapped before
// anything else.)
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052, the last 32 bits
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215, at any RFC 6052 length
	v4Compatible   = netip.MustParsePrefix("::/96")           // RFC 4291 (deprecated), the last 32 bits
	v4Translated   = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 (SIIT), the last 32 bits
	sixToFour      = netip.MustParsePrefix("2002::/16")       // RFC 3056, bits 16 to 47
	teredo         = netip.MustParsePrefix("2001::/32")       // RFC 4380, the server's and the client's
	thisNetwork    = netip.MustParsePrefix("0.0.0.0/8")
	unspecifiedOr1 = netip.MustParsePrefix("::/127") // :: and ::1 are IPv6's own, not IPv4-compatible
)

// reaches is every address a connection to a may end up at: a itself, then each IPv4 address
// an IPv6 form of a embeds. The policy refuses a if it refuses any of them.
func reaches(a netip.Addr) []netip.Addr {
	out := []netip.Addr{a}
	if !a.Is6() {
		return out
	}
	b := a.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	switch {
	case nat64WellKnown.Contains(a), v4Translated.Contains(a), v4Compatible.Contains(a) && !unspecifiedOr1.Contains(a):
		out = append(out, v4(12, 13, 14, 15))
	case nat64Local.Contains(a):
		out = append(out, localNAT64(b)...)
	case sixToFour.Contains(a):
		out = append(out, v4(2, 3, 4, 5))
	case teredo.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		out = append(out, v4(4, 5, 6, 7), client)
	}
	return out
}

// localNAT64 is the IPv4 address an address of the local-use NAT64 prefix embeds, read at
// each prefix length RFC 6052 allows inside it (48, 56, 64, 96): the operator cannot know
// which its network's translator uses. A reading counts where the address is well formed for
// it (bits 64 to 71 and the suffix zero), and not in 0.0.0.0/8, which no translator sends to:
// otherwise every address of the shorter forms would read as 0.0.0.0 at length 96.
func localNAT64(b [16]byte) []netip.Addr {
	if b[8] != 0 {
		return nil
	}
	readings := []struct {
		at     [4]int
		suffix int // the first byte that must be zero to the end
	}{
		{[4]int{6, 7, 9, 10}, 11},
		{[4]int{7, 9, 10, 11}, 12},
		{[4]int{9, 10, 11, 12}, 13},
		{[4]int{12, 13, 14, 15}, 16},
	}
	var out []netip.Addr
	for _, r := range readings {
		if !zero(b[r.suffix:]) {
			continue
		}
		a := netip.AddrFrom4([4]byte{b[r.at[0]], b[r.at[1]], b[r.at[2]], b[r.at[3]]})
		if !thisNetwork.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
