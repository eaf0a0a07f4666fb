package fakes

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a DNS server on loopback (UDP) that answers A and AAAA questions from its table and
// NXDOMAIN to the rest: names that resolve where a test wants, such as to a cloud metadata
// address.
type DNS struct {
	conn  net.PacketConn
	mu    sync.Mutex
	hosts map[string][]netip.Addr
}

// NewDNS starts a DNS server with the names of hosts ("metadata.test" -> 169.254.169.254).
func NewDNS(hosts map[string][]netip.Addr) (*DNS, error) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &DNS{conn: conn, hosts: map[string][]netip.Addr{}}
	for name, addrs := range hosts {
		d.hosts[strings.ToLower(strings.TrimSuffix(name, "."))+"."] = addrs
	}
	go d.serve()
	return d, nil
}

// Resolver looks names up at this server only.
func (d *DNS) Resolver() *net.Resolver {
	addr := d.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", addr)
	}}
}

// Addr is the server's address, host:port.
func (d *DNS) Addr() string { return d.conn.LocalAddr().String() }

// Close stops the server.
func (d *DNS) Close() error { return d.conn.Close() }

func (d *DNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if answer, ok := d.answer(buf[:n]); ok {
			_, _ = d.conn.WriteTo(answer, from)
		}
	}
}

// answer builds the reply to one query.
func (d *DNS) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	d.mu.Lock()
	addrs, known := d.hosts[strings.ToLower(q.Name.String())]
	d.mu.Unlock()
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rcode})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	for _, a := range addrs {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			if b.AResource(rh, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil, false
			}
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			if b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()}) != nil {
				return nil, false
			}
		}
	}
	msg, err := b.Finish()
	return msg, err == nil
}
