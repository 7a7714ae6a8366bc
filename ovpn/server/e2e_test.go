package server

import (
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
	"github.com/wirelane/wirelane/tun"
)

// The end-to-end test runs the server in one network namespace with a real
// TUN device, and Debian's openvpn 2.6 as two clients, each in a namespace
// of its own joined to the server's by a veth pair:
//
//	ovc1 (openvpn, tun0)  c1 ==veth== s1  ovs (Wirelane server, wlsrv0 10.8.0.1/24,
//	ovc2 (openvpn, tun0)  c2 ==veth== s2        10.99.0.1 on lo behind a pushed route)

func needE2E(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test needs root (network namespaces, TUN devices, openvpn clients)")
	}
	netns.Need(t, "openvpn", "ping")
}

// ovpnClient is a running openvpn client.
type ovpnClient struct {
	ns  *netns.NS
	log string
	cmd *exec.Cmd
}

func (c *ovpnClient) logText() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

func startOpenVPNClient(t *testing.T, f *fixture, dir string, ns *netns.NS, name, remote string, extra ...string) *ovpnClient {
	return startOpenVPNClientProto(t, f, dir, ns, name, remote, "udp", extra...)
}

func startOpenVPNClientProto(t *testing.T, f *fixture, dir string, ns *netns.NS, name, remote, proto string, extra ...string) *ovpnClient {
	t.Helper()
	cert, key := f.pki.Valid(t, name, x509.ExtKeyUsageClientAuth)
	c, done := launchOpenVPNClient(t, dir, ns, name, cert, key, proto, remote, extra...)
	netns.Eventually(t, 20*time.Second, "openvpn "+name+" connected", func() error {
		if strings.Contains(c.logText(), "Initialization Sequence Completed") {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("openvpn exited:\n%s", c.logText())
		default:
		}
		return fmt.Errorf("not yet")
	})
	return c
}

// launchOpenVPNClient writes a client configuration with cert and key into
// dir and starts openvpn with it in ns, without waiting for the tunnel. The
// test's cleanup stops it (and logs its output if the test failed); done is
// closed when it has exited.
func launchOpenVPNClient(t *testing.T, dir string, ns *netns.NS, name string, cert, key []byte, proto, remote string, extra ...string) (c *ovpnClient, done <-chan struct{}) {
	t.Helper()
	for file, b := range map[string][]byte{name + ".crt": cert, name + ".key": key} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := strings.Join(append([]string{"client", "dev tun", "proto " + proto, "remote " + remote + " 1194", "nobind",
		"remote-cert-tls server", "ca ca.crt", "cert " + name + ".crt", "key " + name + ".key", "verb 4",
		"connect-retry 1", "explicit-exit-notify 1", "data-ciphers AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305"}, extra...), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, name+".conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c = &ovpnClient{ns: ns, log: filepath.Join(dir, name+".log")}
	c.cmd = netns.Command(ns, "openvpn", "--cd", dir, "--config", name+".conf", "--log", c.log)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { c.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			c.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("openvpn %s log:\n%s", name, c.logText())
		}
	})
	return c, exited
}

func clientByName(s *Server, cn string) (ClientInfo, bool) {
	for _, c := range s.Clients() {
		if c.CommonName == cn {
			return c, true
		}
	}
	return ClientInfo{}, false
}

// twoClientNet makes a server namespace joined by its own veth pair to
// each of two client namespaces: 192.168.N.1 (server) - 192.168.N.2
// (first client) and 192.168.N+1.1 - 192.168.N+1.2 (second client).
func twoClientNet(t *testing.T, tag string, n int) (srv, c1, c2 *netns.NS) {
	t.Helper()
	srv, c1, c2 = netns.New(t, tag+"s"), netns.New(t, tag+"c1"), netns.New(t, tag+"c2")
	netns.Veth(t, srv, "s1", c1, "c1")
	netns.Veth(t, srv, "s2", c2, "c2")
	netns.Run(t, srv, "ip", "addr", "add", fmt.Sprintf("192.168.%d.1/24", n), "dev", "s1")
	netns.Run(t, srv, "ip", "addr", "add", fmt.Sprintf("192.168.%d.1/24", n+1), "dev", "s2")
	netns.Run(t, c1, "ip", "addr", "add", fmt.Sprintf("192.168.%d.2/24", n), "dev", "c1")
	netns.Run(t, c2, "ip", "addr", "add", fmt.Sprintf("192.168.%d.2/24", n+1), "dev", "c2")
	return srv, c1, c2
}

// e2eFixture skips unless the end-to-end tests can run, and returns the
// test PKI and a directory holding its CA certificate for openvpn clients.
func e2eFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	needE2E(t)
	f := newFixture(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), f.pki.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return f, dir
}

// tunIn creates the TUN device name in ns; it is closed when the test ends.
func tunIn(t *testing.T, ns *netns.NS, name string) tun.Device {
	t.Helper()
	var dev tun.Device
	var err error
	if e := testnet.InNamespace(ns.Name, func() { dev, err = tun.CreateTUN(name, 1500) }); e != nil || err != nil {
		t.Fatalf("TUN in %s: %v %v", ns.Name, e, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// udpIn is an Options.WrapSocket that opens the server's socket in ns.
func udpIn(ns *netns.NS) func(open func()) error {
	return func(open func()) error { return testnet.InNamespace(ns.Name, open) }
}

func TestE2EOpenVPNClients(t *testing.T) {
	f, dir := e2eFixture(t)
	srvNS, c1NS, c2NS := twoClientNet(t, "ov", 71)
	netns.Run(t, srvNS, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")

	dev := tunIn(t, srvNS, "wlsrv0")
	netns.Run(t, srvNS, "ip", "addr", "add", "10.8.0.1/24", "dev", "wlsrv0")
	netns.Run(t, srvNS, "ip", "link", "set", "wlsrv0", "up")

	cfg := f.serverConfig(UDP)
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
	cfg.ClientToClient = true
	cfg.RenegSec = 2 // server-initiated renegotiations while the test runs
	log, logs := testlog.New(t)
	s := startServer(t, cfg, Options{Logger: log, WrapSocket: udpIn(srvNS)})
	attached := make(chan error, 1)
	go func() { attached <- s.AttachTUN(dev) }()

	cl1 := startOpenVPNClient(t, f, dir, c1NS, "client1", "192.168.71.1")
	cl2 := startOpenVPNClient(t, f, dir, c2NS, "client2", "192.168.72.1")
	i1, ok1 := clientByName(s, "client1")
	i2, ok2 := clientByName(s, "client2")
	if !ok1 || !ok2 || i1.Address == i2.Address || i1.PeerID == i2.PeerID {
		t.Fatalf("server lists %+v", s.Clients())
	}
	for _, c := range []struct {
		ns   *netns.NS
		info ClientInfo
	}{{c1NS, i1}, {c2NS, i2}} {
		addrs := netns.Run(t, c.ns, "ip", "-4", "addr", "show", "dev", "tun0")
		if !strings.Contains(addrs, c.info.Address.String()+"/24") {
			t.Fatalf("%s: tun0 lacks %s/24:\n%s", c.info.CommonName, c.info.Address, addrs)
		}
		routes := netns.Run(t, c.ns, "ip", "-4", "route", "show", "dev", "tun0")
		if !strings.Contains(routes, "10.99.0.0/24 via 10.8.0.1") {
			t.Fatalf("%s: pushed route missing:\n%s", c.info.CommonName, routes)
		}
		if c.info.Cipher.String() != "AES-256-GCM" || !c.info.EKM {
			t.Fatalf("%s: cipher %v ekm %v", c.info.CommonName, c.info.Cipher, c.info.EKM)
		}
	}
	for _, l := range []string{cl1.logText(), cl2.logText()} {
		if !strings.Contains(l, "peer-id") || !strings.Contains(l, "protocol-flags cc-exit tls-ekm") {
			t.Fatalf("client log lacks the pushed peer-id/protocol-flags:\n%s", l)
		}
	}

	// Traffic: each client to the server's tunnel address, through the
	// pushed route, and to the other client.
	netns.Run(t, c1NS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.8.0.1")
	netns.Run(t, c2NS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.8.0.1")
	netns.Run(t, c1NS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.99.0.1")
	netns.Run(t, c1NS, "ping", "-c", "3", "-i", "0.2", "-W", "2", i2.Address.String())
	netns.Run(t, c2NS, "ping", "-c", "3", "-i", "0.2", "-W", "2", i1.Address.String())
	// Larger packets, fragmented by the sender's kernel.
	netns.Run(t, c1NS, "ping", "-c", "2", "-s", "3000", "-W", "2", "10.8.0.1")

	// The Wirelane client joins from client 1's namespace and reaches the
	// server and the openvpn client 2.
	ccfg := f.clientConfig(t, s, "wlclient", "")
	ccfg.Remotes[0].Host = "192.168.71.1"
	ccfg.Remotes[0].Port = 1194
	wc := dialClient(t, ccfg, client.Options{WrapSocket: func(fn func()) error { return testnet.InNamespace(c1NS.Name, fn) }})
	ping(t, wc, netip.MustParseAddr("10.8.0.1"), 1)
	ping(t, wc, i2.Address, 2)
	// Client 2 pings the Wirelane client, which answers as a host would.
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := wc.ReadPacket(buf)
			if err != nil {
				return
			}
			p := buf[:n]
			if n >= 28 && p[9] == 1 && p[20] == 8 {
				src, dst, _ := ipv4Addrs(p)
				wc.WritePacket(testnet.ICMPEcho(0, dst, src, binary.BigEndian.Uint16(p[24:]), binary.BigEndian.Uint16(p[26:]), p[28:]))
			}
		}
	}()
	netns.Run(t, c2NS, "ping", "-c", "2", "-i", "0.2", "-W", "2", wc.Pushed().Local.Addr().String())

	// The server renegotiated with both openvpn clients; traffic between
	// them continues under the new keys without loss.
	netns.Eventually(t, 10*time.Second, "server-initiated renegotiations", func() error {
		for _, cn := range []string{"client1", "client2"} {
			if !logs.Has("client="+cn+"/", "msg=\"key active\"", "key=2") {
				return fmt.Errorf("%s: no second renegotiated key yet", cn)
			}
		}
		return nil
	})
	if out := netns.Run(t, c1NS, "ping", "-c", "10", "-i", "0.2", "-W", "2", i2.Address.String()); !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("loss across renegotiations:\n%s", out)
	}

	// A clean exit: SIGTERM makes the openvpn client send EXIT (cc-exit);
	// the server forgets it and its address.
	cl2.cmd.Process.Signal(syscall.SIGTERM)
	netns.Eventually(t, 5*time.Second, "client2 removed", func() error {
		if _, ok := clientByName(s, "client2"); ok {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	if out, err := netns.Try(c1NS, nil, "ping", "-c", "1", "-W", "1", i2.Address.String()); err == nil {
		t.Fatalf("ping to the departed client 2 succeeded:\n%s", out)
	}
	netns.Run(t, c1NS, "ping", "-c", "1", "-W", "2", "10.8.0.1")
	s.Close()
	if err := <-attached; err != nil {
		t.Fatalf("AttachTUN: %v", err)
	}
	// Client 1 negotiated cc-exit, so the server told it to reconnect.
	netns.Eventually(t, 3*time.Second, "client 1 told to restart", func() error {
		if strings.Contains(cl1.logText(), "server-pushed-connection-reset") {
			return nil
		}
		return fmt.Errorf("log:\n%s", cl1.logText()[max(0, len(cl1.logText())-1500):])
	})
}

// An openvpn client over TCP with tls-crypt and CHACHA20-POLY1305 that
// renegotiates its keys every few seconds while pinging.
func TestE2EOpenVPNTCPTLSCryptRenegotiation(t *testing.T) {
	needE2E(t)
	f := newFixture(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.crt": f.pki.CAPEM, "ta.key": f.static.Format()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srvNS, cNS := netns.New(t, "ovs"), netns.New(t, "ovc")
	netns.Veth(t, srvNS, "s1", cNS, "c1")
	netns.Run(t, srvNS, "ip", "addr", "add", "192.168.73.1/24", "dev", "s1")
	netns.Run(t, cNS, "ip", "addr", "add", "192.168.73.2/24", "dev", "c1")
	var dev tun.Device
	var err error
	if e := testnet.InNamespace(srvNS.Name, func() { dev, err = tun.CreateTUN("wlsrv0", 1500) }); e != nil || err != nil {
		t.Fatalf("TUN in %s: %v %v", srvNS.Name, e, err)
	}
	defer dev.Close()
	netns.Run(t, srvNS, "ip", "addr", "add", "10.8.0.1/24", "dev", "wlsrv0")
	netns.Run(t, srvNS, "ip", "link", "set", "wlsrv0", "up")

	cfg := f.serverConfig(TCP)
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
	cfg.TLSCrypt = f.static
	cfg.DataCiphers = []data.Cipher{data.ChaCha20Poly1305, data.AES256GCM}
	log, logs := testlog.New(t)
	s := startServer(t, cfg, Options{Logger: log, ListenTCP: func(network, addr string) (l net.Listener, err error) {
		if e := testnet.InNamespace(srvNS.Name, func() { l, err = net.Listen(network, addr) }); e != nil {
			return nil, e
		}
		return l, err
	}})
	go s.AttachTUN(dev)
	cl := startOpenVPNClientProto(t, f, dir, cNS, "tcpclient", "192.168.73.1", "tcp-client", "tls-crypt ta.key", "reneg-sec 2")
	info, ok := clientByName(s, "tcpclient")
	if !ok || info.Cipher != data.ChaCha20Poly1305 {
		t.Fatalf("clients %+v", s.Clients())
	}
	netns.Run(t, cNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.8.0.1")
	netns.Eventually(t, 10*time.Second, "client-initiated renegotiation", func() error {
		if logs.Has("msg=\"key active\"", "key=2") {
			return nil
		}
		return fmt.Errorf("no second renegotiation yet")
	})
	// Traffic continues under the new keys, with no loss.
	out := netns.Run(t, cNS, "ping", "-c", "10", "-i", "0.2", "-W", "2", "10.8.0.1")
	if !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("loss after renegotiation:\n%s", out)
	}
	_ = cl
}
