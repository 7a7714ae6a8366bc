package control

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/keys"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

type testCA struct {
	pem  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, cn string) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: c, key: key}
}

func (ca *testCA) leaf(t *testing.T, subj pkix.Name, eku x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subj,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{eku},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

// link connects two channels in memory; drop decides per packet (numbered
// from 0 in each direction) whether it is lost.
type link struct {
	mu      sync.Mutex
	a, b    *Channel
	n       [2]int
	drop    func(dir, n int) bool
	dropped int
	capture chan []byte // receives packets for a missing b
}

func (l *link) sender(dir int) func([]byte) error {
	return func(p []byte) error {
		l.mu.Lock()
		n := l.n[dir]
		l.n[dir]++
		drop := l.drop != nil && l.drop(dir, n)
		if drop {
			l.dropped++
		}
		to := l.b
		if dir == 1 {
			to = l.a
		}
		capture := l.capture
		l.mu.Unlock()
		switch {
		case drop:
		case to == nil:
			select {
			case capture <- append([]byte(nil), p...):
			default:
			}
		default:
			go func() {
				if err := to.HandlePacket(append([]byte(nil), p...)); err != nil && testing.Verbose() {
					println("link:", err.Error())
				}
			}()
		}
		return nil
	}
}

type pair struct {
	cli, srv       *Channel
	cliTLS, srvTLS *tls.Config
	l              *link
	softResets     chan *KeyState // key states the client started, as the server sees them
	cliSoftResets  chan *KeyState // key states the server started, as the client sees them
}

func newPair(t *testing.T, w func(server bool) wrap.Wrapper, drop func(dir, n int) bool) *pair {
	ca := newCA(t, "CA")
	sc, sk := ca.leaf(t, pkix.Name{CommonName: "server", Organization: []string{"Wirelane"}}, x509.ExtKeyUsageServerAuth)
	cc, ck := ca.leaf(t, pkix.Name{CommonName: "client"}, x509.ExtKeyUsageClientAuth)
	p := &pair{l: &link{drop: drop}, softResets: make(chan *KeyState, 1), cliSoftResets: make(chan *KeyState, 4)}
	var err error
	if p.cliTLS, err = TLSConfig(TLSParams{CA: ca.pem, Cert: cc, Key: ck, RemoteCertTLS: "server", VerifyX509: "server", VerifyX509Typ: "name"}); err != nil {
		t.Fatal(err)
	}
	if p.srvTLS, err = TLSConfig(TLSParams{CA: ca.pem, Cert: sc, Key: sk, Server: true, RemoteCertTLS: "client"}); err != nil {
		t.Fatal(err)
	}
	var wc, ws wrap.Wrapper
	if w != nil {
		wc, ws = w(false), w(true)
	}
	p.cli, _ = NewChannel(ChannelConfig{Client: true, Wrapper: wc, Send: p.l.sender(0), OnSoftReset: func(ks *KeyState) {
		select {
		case p.cliSoftResets <- ks:
		default:
		}
	}})
	p.srv, _ = NewChannel(ChannelConfig{Wrapper: ws, Send: p.l.sender(1), OnSoftReset: func(ks *KeyState) { go func() { p.softResets <- ks }() }})
	p.l.a, p.l.b = p.cli, p.srv
	t.Cleanup(func() { p.cli.Close(); p.srv.Close() })
	return p
}

// exchange runs TLS and key_method_2 on both key states and returns the
// tls-ekm material each side derived.
func (p *pair) exchange(t *testing.T, cks, sks *KeyState) (keys.Material, keys.Material) {
	t.Helper()
	type result struct {
		m   keys.Material
		km  *KeyMethod2
		err error
	}
	run := func(conn *tls.Conn, client bool, out chan<- result) {
		var r result
		defer func() { out <- r }()
		if r.err = conn.Handshake(); r.err != nil {
			return
		}
		mine, _ := NewKeyMethod2(client)
		mine.Options = "V4,test"
		if client {
			mine.PeerInfo = "IV_PROTO=142\n"
			mine.Username, mine.Password = "user", "pass"
		}
		if _, r.err = conn.Write(mine.Marshal(client)); r.err != nil {
			return
		}
		if r.km, r.err = ReadKeyMethod2(conn, !client); r.err != nil {
			return
		}
		if client {
			r.err = WriteMessage(conn, "PUSH_REQUEST")
		} else {
			var m string
			if m, r.err = NewMessageReader(conn).Read(); r.err == nil && m != "PUSH_REQUEST" {
				r.err = errors.New("got " + m)
			}
		}
		cs := conn.ConnectionState()
		r.m, _ = keys.FromEKM(cs.ExportKeyingMaterial)
	}
	cr, sr := make(chan result, 1), make(chan result, 1)
	go run(tls.Client(cks.Conn(), p.cliTLS), true, cr)
	go run(tls.Server(sks.Conn(), p.srvTLS), false, sr)
	var c, s result
	for i := 0; i < 2; i++ {
		select {
		case c = <-cr:
		case s = <-sr:
		case <-time.After(20 * time.Second):
			t.Fatal("key exchange hung")
		}
	}
	if c.err != nil || s.err != nil {
		t.Fatalf("client: %v, server: %v", c.err, s.err)
	}
	if s.km.Username != "user" || s.km.Password != "pass" || s.km.PeerInfo != "IV_PROTO=142\n" || c.km.Options != "V4,test" {
		t.Fatalf("key_method_2 fields: %+v / %+v", s.km, c.km)
	}
	return c.m, s.m
}

func TestKeyExchangeOverReliableWithLoss(t *testing.T) {
	// Lose the client's second and the server's third packet (handshake
	// messages or acks): retransmission or repeated acks must recover.
	p := newPair(t, func(server bool) wrap.Wrapper {
		var k wrap.StaticKey
		k[3] = 3
		w, _ := wrap.NewTLSCrypt(&k, server)
		return w
	}, func(dir, n int) bool { return (dir == 0 && n == 1) || (dir == 1 && n == 2) })
	sks, _ := p.srv.Start(0)
	cks, _ := p.cli.Start(0)
	<-p.cli.PeerKnown()
	cm, sm := p.exchange(t, cks, sks)
	if cm != sm {
		t.Fatal("tls-ekm material differs between the sides")
	}
	if p.l.dropped != 2 {
		t.Fatalf("dropped %d packets, want 2", p.l.dropped)
	}

	// Client-initiated soft reset on key id 1: the server learns of it by
	// the SOFT_RESET_V1 and runs a fresh TLS session.
	cks1, _ := p.cli.Start(1)
	var sks1 *KeyState
	select {
	case sks1 = <-p.softResets:
	case <-time.After(5 * time.Second):
		t.Fatal("server saw no soft reset")
	}
	if sks1.ID != 1 {
		t.Fatalf("soft reset key id %d", sks1.ID)
	}
	cm1, sm1 := p.exchange(t, cks1, sks1)
	if cm1 != sm1 || cm1 == cm {
		t.Fatal("renegotiated keys wrong")
	}
	deadline := time.Now().Add(3 * time.Second)
	for !(cks1.Idle() && sks1.Idle()) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !cks1.Idle() || !sks1.Idle() {
		t.Fatal("messages left unacknowledged")
	}
}

func TestChannelRejectsForeignPackets(t *testing.T) {
	cli, _ := NewChannel(ChannelConfig{Client: true, Send: func([]byte) error { return nil }})
	defer cli.Close()
	p := struct{ cli *Channel }{cli}
	p.cli.Start(0)
	// A CONTROL_V1 before any reset is dropped.
	pkt, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: wire.SessionID{9}})
	if err := p.cli.HandlePacket(pkt); err == nil {
		t.Fatal("accepted CONTROL_V1 before the reset")
	}
	reset, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetServerV2, Session: wire.SessionID{1}})
	if err := p.cli.HandlePacket(reset); err != nil {
		t.Fatal(err)
	}
	other, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: wire.SessionID{2}, ID: 1})
	if err := p.cli.HandlePacket(other); err == nil {
		t.Fatal("accepted a packet from another session")
	}
	wrongAck, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.AckV1, Session: wire.SessionID{1}, NumAcks: 1, Remote: wire.SessionID{7}})
	if err := p.cli.HandlePacket(wrongAck); err == nil {
		t.Fatal("accepted acks for another session")
	}
	noKey, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, KeyID: 5, Session: wire.SessionID{1}, ID: 0})
	if err := p.cli.HandlePacket(noKey); !errors.Is(err, ErrNoKeyState) {
		t.Fatalf("unknown key id: %v", err)
	}
	if err := p.cli.HandlePacket([]byte{0x20, 1}); err == nil {
		t.Fatal("accepted a truncated packet")
	}
}

func TestVerifyPeer(t *testing.T) {
	ca, other := newCA(t, "CA"), newCA(t, "Other")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	parse := func(p []byte) *x509.Certificate {
		b, _ := pem.Decode(p)
		c, _ := x509.ParseCertificate(b.Bytes)
		return c
	}
	subj := pkix.Name{Country: []string{"DE"}, Organization: []string{"Wirelane"}, CommonName: "vpn.example"}
	srvPEM, _ := ca.leaf(t, subj, x509.ExtKeyUsageServerAuth)
	cliPEM, _ := ca.leaf(t, pkix.Name{CommonName: "client"}, x509.ExtKeyUsageClientAuth)
	foreignPEM, _ := other.leaf(t, subj, x509.ExtKeyUsageServerAuth)
	srv, cli, foreign := parse(srvPEM), parse(cliPEM), parse(foreignPEM)
	if got := SubjectString(srv.Subject); got != "C=DE, O=Wirelane, CN=vpn.example" {
		t.Fatalf("subject string %q", got)
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		cert *x509.Certificate
		p    TLSParams
		ok   bool
	}{
		{"good server", srv, TLSParams{RemoteCertTLS: "server"}, true},
		{"client cert posing as server", cli, TLSParams{RemoteCertTLS: "server"}, false},
		{"no EKU check", cli, TLSParams{}, true},
		{"foreign CA", foreign, TLSParams{}, false},
		{"subject match", srv, TLSParams{VerifyX509: "C=DE, O=Wirelane, CN=vpn.example", VerifyX509Typ: "subject"}, true},
		{"subject mismatch", srv, TLSParams{VerifyX509: "CN=vpn.example", VerifyX509Typ: "subject"}, false},
		{"name", srv, TLSParams{VerifyX509: "vpn.example", VerifyX509Typ: "name"}, true},
		{"name-prefix", srv, TLSParams{VerifyX509: "vpn.", VerifyX509Typ: "name-prefix"}, true},
		{"name-prefix mismatch", srv, TLSParams{VerifyX509: "web.", VerifyX509Typ: "name-prefix"}, false},
	} {
		err := verifyPeer([]*x509.Certificate{c.cert}, roots, c.p, now)
		if (err == nil) != c.ok {
			t.Errorf("%s: err=%v", c.name, err)
		}
		if err != nil && !errors.Is(err, ErrVerify) {
			t.Errorf("%s: error not ErrVerify: %v", c.name, err)
		}
	}
	if err := verifyPeer([]*x509.Certificate{srv}, roots, TLSParams{}, now.Add(48*time.Hour)); err == nil {
		t.Error("expired certificate accepted")
	}
	if _, err := TLSConfig(TLSParams{CA: []byte("junk")}); err == nil {
		t.Error("junk CA accepted")
	}
}

func TestKeyMethod2RoundTrip(t *testing.T) {
	m, _ := NewKeyMethod2(true)
	m.Options, m.Username, m.Password, m.PeerInfo = "V4,x", "u", "p", "IV_VER=2.6.14\n"
	b := m.Marshal(true)
	if !bytes.Equal(b[:5], []byte{0, 0, 0, 0, 2}) || len(b) != 5+48+64+2+5+2+2+2+2+2+15 {
		t.Fatalf("layout: len %d head %x", len(b), b[:5])
	}
	got, err := ParseKeyMethod2(b, true)
	if err != nil || *got != *m {
		t.Fatalf("round trip: %v", err)
	}
	s := &KeyMethod2{Options: "V4,server"}
	b = s.Marshal(false)
	// Empty strings are two zero bytes.
	if !bytes.HasSuffix(b, []byte{0, 0, 0, 0, 0, 0}) {
		t.Fatalf("empty strings encoded as %x", b[len(b)-6:])
	}
	if got, err := ParseKeyMethod2(b[:len(b)-6], false); err != nil || got.Options != "V4,server" {
		t.Fatalf("optional trailing fields: %v", err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 2, 1}, append(s.Marshal(false)[:5+64], 0, 9, 'x')} {
		if _, err := ParseKeyMethod2(bad, false); !errors.Is(err, ErrKeyMethod) {
			t.Errorf("%x: %v", bad, err)
		}
	}
}

func TestPushReply(t *testing.T) {
	var a PushAccumulator
	done, err := a.Add("PUSH_REPLY,route-gateway 10.199.0.1,topology subnet,ping 10,push-continuation 2")
	if err != nil || done {
		t.Fatalf("first part: done=%v %v", done, err)
	}
	done, _ = a.Add("PUSH_REPLY,ping-restart 60,ifconfig 10.199.0.2 255.255.255.0,peer-id 3,cipher AES-256-GCM,protocol-flags cc-exit tls-ekm,route 192.168.5.0 255.255.255.0,dhcp-option DNS 10.199.0.1,ifconfig-ipv6 fd00::2/64 fd00::1,push-continuation 1")
	if !done {
		t.Fatal("last part not recognised")
	}
	r, err := a.Reply()
	if err != nil {
		t.Fatal(err)
	}
	if r.Local != netip.MustParsePrefix("10.199.0.2/24") || r.Remote != netip.MustParseAddr("10.199.0.1") ||
		r.PeerID != 3 || !r.HasPeerID || r.Cipher != "AES-256-GCM" || !r.TLSEKM || !r.CCExit || r.Ping != 10 || r.PingRestart != 60 ||
		len(r.Routes) != 1 || r.Routes[0] != netip.MustParsePrefix("192.168.5.0/24") || len(r.DNS) != 1 ||
		r.Local6 != netip.MustParsePrefix("fd00::2/64") {
		t.Fatalf("%+v", r)
	}
	r, err = ParsePushOptions([]string{"ifconfig 10.8.0.6 10.8.0.5"})
	if err != nil || r.Local != netip.MustParsePrefix("10.8.0.6/32") || r.Remote != netip.MustParseAddr("10.8.0.5") {
		t.Fatalf("net30: %+v %v", r, err)
	}
	for _, bad := range []string{"peer-id x", "ifconfig 1.2.3.4", "ping -1", "route 1.2.3.4 255.0.255.0", "ifconfig 10.0.0.2 255.255.0.255"} {
		opts := []string{bad}
		if strings.HasPrefix(bad, "ifconfig") {
			opts = append(opts, "topology subnet")
		}
		if _, err := ParsePushOptions(opts); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// What an OpenVPN 2.6 server with server-ipv6 pushes, plus route-ipv6
// lines with and without a gateway.
func TestPushReplyIPv6(t *testing.T) {
	r, err := ParsePushOptions([]string{"route-gateway 10.8.0.1", "topology subnet", "route-ipv6 fd99::/64",
		"route-ipv6 2001:db8::/32 fd42:42::7", "ifconfig-ipv6 fd42:42::1000/64 fd42:42::1", "ifconfig 10.8.0.2 255.255.255.0"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Local6 != netip.MustParsePrefix("fd42:42::1000/64") || r.Remote6 != netip.MustParseAddr("fd42:42::1") ||
		len(r.Routes) != 2 || r.Routes[0] != netip.MustParsePrefix("fd99::/64") || r.Routes[1] != netip.MustParsePrefix("2001:db8::/32") {
		t.Fatalf("%+v", r)
	}
	if gw, ok := r.RouteGateways[r.Routes[0]]; ok {
		t.Fatalf("gateway %s for a route-ipv6 without one", gw)
	}
	if gw := r.RouteGateways[r.Routes[1]]; gw != netip.MustParseAddr("fd42:42::7") {
		t.Fatalf("route-ipv6 gateway %s", gw)
	}
	r, err = ParsePushOptions([]string{"ifconfig-ipv6 2001:db8::5/128"})
	if err != nil || r.Local6 != netip.MustParsePrefix("2001:db8::5/128") || r.Remote6.IsValid() {
		t.Fatalf("ifconfig-ipv6 without remote: %+v %v", r, err)
	}
	for _, bad := range []string{"ifconfig-ipv6 10.0.0.2/24 fd00::1", "ifconfig-ipv6 fd00::2/64 10.0.0.1", "ifconfig-ipv6 fd00::2",
		"route-ipv6 10.0.0.0/8", "route-ipv6 fd00::/8 nowhere", "route-ipv6 fd00::/8 10.0.0.1"} {
		if _, err := ParsePushOptions([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// DNS servers and domains as OpenVPN servers push them: DNS and DNS6
// in order without repeats, the last DOMAIN first in the search list,
// malformed values skipped with a note instead of failing the session.
func TestPushReplyDNS(t *testing.T) {
	r, err := ParsePushOptions([]string{"dhcp-option DNS 10.8.0.1", "dhcp-option DNS6 fd00::53", "dhcp-option DNS 10.8.0.1",
		"dhcp-option DOMAIN-SEARCH lab.example", "dhcp-option DOMAIN old.example", "dhcp-option DOMAIN corp.example.",
		"dhcp-option DOMAIN-SEARCH Corp.Example", "dhcp-option DOMAIN-SEARCH lab.example", "dhcp-option DOMAIN-SEARCH b_c.example",
		"dhcp-option WINS 10.8.0.2", "dhcp-option NTP 10.8.0.3", "dhcp-option DNS bogus", "dhcp-option DNS 10.8.0.9 extra",
		"dhcp-option DOMAIN a;b", "dhcp-option DOMAIN-SEARCH -x.example", "dhcp-option DNS ::", "dhcp-option DNS fe80::1%eth0",
		"dhcp-option", "dhcp-option DOMAIN " + strings.Repeat("a", 64) + ".example"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.DNS, []netip.Addr{netip.MustParseAddr("10.8.0.1"), netip.MustParseAddr("fd00::53")}) {
		t.Errorf("DNS %v", r.DNS)
	}
	if r.Domain != "corp.example" || !slices.Equal(r.SearchDomains, []string{"lab.example", "Corp.Example", "b_c.example"}) {
		t.Errorf("domain %q, search %q", r.Domain, r.SearchDomains)
	}
	if got := r.SearchList(); !slices.Equal(got, []string{"corp.example", "lab.example", "b_c.example"}) {
		t.Errorf("search list %q", got)
	}
	if len(r.Ignored) != 8 {
		t.Errorf("ignored %d, want 8: %q", len(r.Ignored), r.Ignored)
	}
	for _, want := range []string{`"dhcp-option DNS bogus": not a server address`, `"dhcp-option DOMAIN a;b": not a domain name`,
		`"dhcp-option DNS 10.8.0.9 extra": want one value`} {
		if !slices.Contains(r.Ignored, want) {
			t.Errorf("ignored lacks %s: %q", want, r.Ignored)
		}
	}
	if r.BlockIPv6 {
		t.Error("block-ipv6 without the option")
	}
	r, err = ParsePushOptions([]string{"block-ipv6", "block-ipv6 now"})
	if err != nil || !r.BlockIPv6 || !slices.Equal(r.Ignored, []string{`"block-ipv6 now": takes no argument`}) {
		t.Errorf("block-ipv6: %+v %v", r, err)
	}
	r, err = ParsePushOptions([]string{"dhcp-option DOMAIN-SEARCH x.example"})
	if err != nil || r.Domain != "" || !slices.Equal(r.SearchList(), []string{"x.example"}) || len(r.DNS) != 0 {
		t.Errorf("search only: %+v %v", r, err)
	}
	for d, ok := range map[string]bool{"example": true, "a-b.example": true, "x": true, "": false, "a..b": false,
		"a b": false, "a\nb": false, "a-.example": false, strings.Repeat("a.", 127) + "a": false} {
		if ValidDomain(d) != ok {
			t.Errorf("ValidDomain(%q) = %v", d, !ok)
		}
	}
}

func FuzzParseKeyMethod2(f *testing.F) {
	m, _ := NewKeyMethod2(true)
	m.Options = "V4"
	f.Add(m.Marshal(true), true)
	f.Add(m.Marshal(false), false)
	f.Fuzz(func(t *testing.T, b []byte, client bool) {
		_, _ = ParseKeyMethod2(b, client)
	})
}

func FuzzPushReply(f *testing.F) {
	f.Add("PUSH_REPLY,ifconfig 10.0.0.2 255.255.255.0,topology subnet,peer-id 1,push-continuation 1")
	f.Add("PUSH_REPLY,route 1.2.3.0 255.255.255.0,ifconfig-ipv6 ::1/64 ::2")
	f.Add("PUSH_REPLY,route-ipv6 2000::/4 fd00::1,redirect-gateway def1 ipv6,ifconfig-ipv6 fd00::2/64 fd00::1")
	f.Add("PUSH_REPLY,dns server 0 address 10.8.0.1 [fd00::53]:53,dns server 1 resolve-domains x.example,dns search-domains a.example b.example")
	f.Add("PUSH_REPLY,dhcp-option DNS 10.8.0.1,dhcp-option DNS6 fd00::53,dhcp-option DOMAIN corp.example,dhcp-option DOMAIN-SEARCH lab.example,dhcp-option DNS x,block-ipv6")
	f.Fuzz(func(t *testing.T, s string) {
		var a PushAccumulator
		if _, err := a.Add(s); err == nil {
			if r, err := a.Reply(); err == nil {
				for _, d := range r.SearchList() {
					if !ValidDomain(d) {
						t.Fatalf("invalid search domain %q kept", d)
					}
				}
				for _, a := range r.DNS {
					if !a.IsValid() || a.IsUnspecified() || a.Zone() != "" {
						t.Fatalf("bad DNS server %v kept", a)
					}
				}
			}
		}
	})
}

func FuzzHandlePacket(f *testing.F) {
	reset, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetServerV2, Session: wire.SessionID{1}})
	ctl, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: wire.SessionID{1}, ID: 3, Payload: []byte("x")})
	soft, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.SoftResetV1, KeyID: 2, Session: wire.SessionID{1}, ID: 0})
	f.Add(reset, ctl)
	f.Add(reset, soft)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ch, _ := NewChannel(ChannelConfig{Client: true, Send: func([]byte) error { return nil }, OnSoftReset: func(*KeyState) {}})
		defer ch.Close()
		ch.Start(0)
		ch.HandlePacket(a)
		ch.HandlePacket(b)
		ch.Flush()
	})
}

// A server channel made after a stateless reset exchange (as a UDP server
// does once the client acknowledged the reset it answered without state)
// carries the TLS session, renegotiations on reused key ids and reports a
// client that starts over.
func TestServerChannelAfterStatelessReset(t *testing.T) {
	p := newPair(t, nil, nil) // for its TLS configurations and link
	p.srv.Close()
	first := make(chan []byte, 4)
	p.l.mu.Lock()
	p.l.b, p.l.capture = nil, first // until the server exists
	p.l.mu.Unlock()
	cks, _ := p.cli.Start(0)
	var reset wire.ControlPacket
	if err := wire.DecodeControl(<-first, &reset); err != nil || reset.Op != wire.HardResetClientV2 {
		t.Fatalf("client's first packet: %v %v", reset.Op, err)
	}
	local := wire.SessionID{0xc0, 0x0c, 0x1e}
	reply, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetServerV2, Session: local,
		NumAcks: 1, Acks: [8]uint32{0}, Remote: reset.Session, ID: 0})
	if err := p.cli.HandlePacket(reply); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.cli.RemoteSession(); got != local {
		t.Fatalf("client learned session %x", got)
	}
	srv, sks := NewServerChannel(ChannelConfig{Send: p.l.sender(1),
		OnSoftReset: func(ks *KeyState) { go func() { p.softResets <- ks }() }}, local, reset.Session, true)
	defer srv.Close()
	if srv.LocalSession() != local || srv.State(0) != sks {
		t.Fatal("server channel has the wrong session id or key state 0")
	}
	p.l.mu.Lock()
	p.l.b, p.srv = srv, srv
	p.l.mu.Unlock()
	cm, sm := p.exchange(t, cks, sks)
	if cm != sm {
		t.Fatal("tls-ekm material differs")
	}

	// Renegotiate on key 1, retire it, then reuse id 1: the second soft
	// reset must start a new key state, not count as a duplicate.
	var prev *KeyState
	for round := 0; round < 2; round++ {
		if round == 1 {
			// Let round 0's acks settle first: ids are reused only after
			// cycling through 1..7, long after the old state went quiet.
			deadline := time.Now().Add(3 * time.Second)
			for !(prev.Idle() && p.cli.State(1).Idle()) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			srv.Retire(prev)
			p.cli.Remove(p.cli.State(1))
		}
		cks1, _ := p.cli.Start(1)
		var sks1 *KeyState
		select {
		case sks1 = <-p.softResets:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: server saw no soft reset", round)
		}
		if sks1 == prev || sks1.ID != 1 {
			t.Fatalf("round %d: key state %p id %d reused", round, sks1, sks1.ID)
		}
		if c1, s1 := p.exchange(t, cks1, sks1); c1 != s1 {
			t.Fatalf("round %d: keys differ", round)
		}
		prev = sks1
	}

	other, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{7}})
	if err := srv.HandlePacket(other); !errors.Is(err, ErrNewSession) {
		t.Fatalf("hard reset from a new client session: %v, want ErrNewSession", err)
	}
}

// A pushed tun-mtu (OpenVPN 2.6 pushes it with OPT_P_PUSH_MTU), with or
// without its occ-mtu; a malformed or out-of-range one is Ignored.
func TestPushReplyTunMTU(t *testing.T) {
	for _, tc := range []struct {
		opt     string
		mtu     int
		ignored bool
	}{
		{"tun-mtu 1400", 1400, false},
		{"tun-mtu 1420 1500", 1420, false},
		{"tun-mtu 99", 0, true},
		{"tun-mtu 70000", 0, true},
		{"tun-mtu x", 0, true},
		{"tun-mtu", 0, true},
	} {
		r, err := ParsePushOptions([]string{"ifconfig 10.8.0.2 255.255.255.0", "topology subnet", tc.opt})
		if err != nil {
			t.Fatalf("%q: %v", tc.opt, err)
		}
		if r.TunMTU != tc.mtu || (len(r.Ignored) > 0) != tc.ignored {
			t.Errorf("%q: TunMTU %d, Ignored %q", tc.opt, r.TunMTU, r.Ignored)
		}
	}
}
