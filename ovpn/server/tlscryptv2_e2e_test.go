package server

// Debian's openvpn 2.6 as a client of the Wirelane server (UDP, a real TUN
// device in the server namespace) with tls-crypt-v2 and with
// peer-fingerprint:
//
//	ovc (openvpn, tun0)  c1 192.168.N.2 ==veth== s1 192.168.N.1  ovs (Wirelane server, wlsrv0 10.8.0.1/24)
//
// Each test pings the server's tunnel address, runs a short iperf3 each
// way and waits for a renegotiation (reneg-sec 2 on the client).

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// oneClientNet is a server namespace with the server's TUN device up at
// 10.8.0.1/24 and a client namespace, joined by a veth pair on
// 192.168.n.0/24.
func oneClientNet(t *testing.T, tag string, n int) (srv, cli *netns.NS) {
	t.Helper()
	srv, cli = netns.New(t, tag+"s"), netns.New(t, tag+"c")
	netns.Veth(t, srv, "s1", cli, "c1")
	netns.Run(t, srv, "ip", "addr", "add", fmt.Sprintf("192.168.%d.1/24", n), "dev", "s1")
	netns.Run(t, cli, "ip", "addr", "add", fmt.Sprintf("192.168.%d.2/24", n), "dev", "c1")
	return srv, cli
}

// serveInNS starts s's configuration cfg in srv with a TUN device.
func serveInNS(t *testing.T, srv *netns.NS, cfg *Config) (*Server, *testlog.Buffer) {
	t.Helper()
	dev := tunIn(t, srv, "wlsrv0")
	netns.Run(t, srv, "ip", "addr", "add", "10.8.0.1/24", "dev", "wlsrv0")
	netns.Run(t, srv, "ip", "link", "set", "wlsrv0", "up")
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
	log, logs := testlog.New(t)
	s := startServer(t, cfg, Options{Logger: log, WrapSocket: udpIn(srv)})
	go s.AttachTUN(dev)
	return s, logs
}

// pingIperfReneg pings 10.8.0.1 from cli, runs iperf3 for a second each
// way and waits for the client's renegotiation (key id 1 active on the
// server), then pings again without loss.
func pingIperfReneg(t *testing.T, srv, cli *netns.NS, logs *testlog.Buffer) {
	t.Helper()
	netns.Run(t, cli, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.8.0.1")
	for i, reverse := range []bool{false, true} {
		port := strconv.Itoa(5400 + i)
		srvProc := netns.Start(t, srv, "iperf3", "-s", "-1", "-B", "10.8.0.1", "-p", port)
		args := []string{"iperf3", "-c", "10.8.0.1", "-p", port, "-t", "1", "-J", "--connect-timeout", "2000"}
		if reverse {
			args = append(args, "-R")
		}
		netns.Eventually(t, 5*time.Second, strings.Join(args, " "), func() error {
			out, err := netns.Try(cli, nil, args...)
			var res struct {
				End struct {
					SumReceived struct {
						Bytes float64 `json:"bytes"`
					} `json:"sum_received"`
				} `json:"end"`
				Error string `json:"error"`
			}
			if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || err != nil || res.Error != "" {
				return fmt.Errorf("iperf3: %v %v %s", err, jerr, res.Error)
			}
			if res.End.SumReceived.Bytes <= 0 {
				return fmt.Errorf("no data received")
			}
			t.Logf("iperf3 (reverse %v): %.0f bytes", reverse, res.End.SumReceived.Bytes)
			return nil
		})
		srvProc.Wait(t, 5*time.Second)
	}
	netns.Eventually(t, 10*time.Second, "client renegotiation", func() error {
		if logs.Has("msg=\"key active\"", "key=1") {
			return nil
		}
		return fmt.Errorf("not yet")
	})
	if out := netns.Run(t, cli, "ping", "-c", "5", "-i", "0.2", "-W", "2", "10.8.0.1"); !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("loss after renegotiation:\n%s", out)
	}
}

// openvpn 2.6 clients against a tls-crypt-v2 server whose key Wirelane
// generated: one with a client key openvpn made from it (--genkey
// tls-crypt-v2-client, its metadata listed in
// tls-crypt-v2-metadata-allow), one with a key Wirelane made whose
// metadata is not listed (refused before TLS).
func TestE2EOpenVPNClientTLSCryptV2(t *testing.T) {
	f, dir := e2eFixture(t)
	netns.Need(t, "iperf3")
	srvNS, cNS := oneClientNet(t, "v2", 75)
	sk, err := wrap.GenerateV2ServerKey()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "v2server.key"), sk.Format(), 0o600)
	meta := base64.StdEncoding.EncodeToString([]byte("laptop-42"))
	cmd := exec.Command("openvpn", "--tls-crypt-v2", "v2server.key", "--genkey", "tls-crypt-v2-client", "v2client.key", meta)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openvpn --genkey: %v\n%s", err, out)
	}
	md, _ := wrap.UserMetadata(base64.StdEncoding.EncodeToString([]byte("not-listed")))
	unlisted, _ := sk.NewClientKey(md)
	os.WriteFile(filepath.Join(dir, "unlisted.key"), unlisted.Format(), 0o600)
	os.WriteFile(filepath.Join(dir, "allowed"), []byte(meta+"\n"), 0o600)

	cfg := f.serverConfig(UDP)
	cfg.TLSCryptV2Server = sk
	cfg.TLSCryptV2AllowFile = filepath.Join(dir, "allowed")
	s, logs := serveInNS(t, srvNS, cfg)
	startOpenVPNClient(t, f, dir, cNS, "v2laptop", "192.168.75.1", "tls-crypt-v2 v2client.key", "reneg-sec 2")
	if info, ok := clientByName(s, "v2laptop"); !ok || info.KeyMetadata != "user "+meta {
		t.Fatalf("clients %+v", s.Clients())
	}
	pingIperfReneg(t, srvNS, cNS, logs)

	// The unlisted key: refused at its CONTROL_WKC_V1, never reaching TLS.
	cert, key := f.pki.Valid(t, "v2unlisted", x509.ExtKeyUsageClientAuth)
	launchOpenVPNClient(t, dir, cNS, "v2unlisted", cert, key, "udp", "192.168.75.1", "tls-crypt-v2 unlisted.key")
	netns.Eventually(t, 10*time.Second, "the unlisted key refused", func() error {
		if s.Stats().KeyRefused.Load() > 0 {
			return nil
		}
		return fmt.Errorf("not yet")
	})
	if !logs.Has("tls-crypt-v2 client key refused", "user "+base64.StdEncoding.EncodeToString([]byte("not-listed"))) {
		t.Error("the refusal is not logged with the key's metadata")
	}
	if _, ok := clientByName(s, "v2unlisted"); ok {
		t.Fatal("the unlisted key connected")
	}
}

// openvpn 2.6 with a self-signed certificate and <peer-fingerprint>
// against a Wirelane server with a self-signed certificate and no CA.
func TestE2EOpenVPNClientPeerFingerprint(t *testing.T) {
	needE2E(t)
	netns.Need(t, "iperf3")
	dir := t.TempDir()
	srvNS, cNS := oneClientNet(t, "fp", 77)
	srvCert, srvKey, srvFP := testpki.SelfSigned(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey, cliFP := testpki.SelfSigned(t, "fpclient", x509.ExtKeyUsageClientAuth)
	text := fmt.Sprintf("server 10.8.0.0 255.255.255.0\nremote-cert-tls client\npeer-fingerprint %s\n<cert>\n%s</cert>\n<key>\n%s</key>\n", cliFP, srvCert, srvKey)
	cfg, err := ParseConfig([]byte(text), "server.conf", "")
	if err != nil {
		t.Fatal(err)
	}
	s, logs := serveInNS(t, srvNS, cfg)
	os.WriteFile(filepath.Join(dir, "fpclient.crt"), cliCert, 0o600)
	os.WriteFile(filepath.Join(dir, "fpclient.key"), cliKey, 0o600)
	conf := "client\ndev tun\nproto udp\nremote 192.168.77.1 1194\nnobind\nremote-cert-tls server\ncert fpclient.crt\nkey fpclient.key\n" +
		"verb 4\nconnect-retry 1\nreneg-sec 2\n<peer-fingerprint>\n" + srvFP + "\n</peer-fingerprint>\n"
	os.WriteFile(filepath.Join(dir, "fpclient.conf"), []byte(conf), 0o600)
	logPath := filepath.Join(dir, "fpclient.log")
	cmd := netns.Command(cNS, "openvpn", "--cd", dir, "--config", "fpclient.conf", "--log", logPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("openvpn log:\n%s", b)
		}
	})
	netns.Eventually(t, 20*time.Second, "openvpn connected", func() error {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "Initialization Sequence Completed") {
			return nil
		}
		return fmt.Errorf("not yet")
	})
	if _, ok := clientByName(s, "fpclient"); !ok {
		t.Fatalf("clients %+v", s.Clients())
	}
	pingIperfReneg(t, srvNS, cNS, logs)
}

// An openvpn 2.6 client over TCP with a tls-crypt-v2 key: the server
// unwraps the WKc of the first frame.
func TestE2EOpenVPNClientTLSCryptV2TCP(t *testing.T) {
	f, dir := e2eFixture(t)
	srvNS, cNS := oneClientNet(t, "v2t", 79)
	sk, _ := wrap.GenerateV2ServerKey()
	md, _ := wrap.UserMetadata(base64.StdEncoding.EncodeToString([]byte("tcp")))
	ck, _ := sk.NewClientKey(md)
	os.WriteFile(filepath.Join(dir, "v2client.key"), ck.Format(), 0o600)
	dev := tunIn(t, srvNS, "wlsrv0")
	netns.Run(t, srvNS, "ip", "addr", "add", "10.8.0.1/24", "dev", "wlsrv0")
	netns.Run(t, srvNS, "ip", "link", "set", "wlsrv0", "up")
	cfg := f.serverConfig(TCP)
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
	cfg.TLSCryptV2Server = sk
	s := startServer(t, cfg, Options{ListenTCP: func(network, addr string) (l net.Listener, err error) {
		if e := testnet.InNamespace(srvNS.Name, func() { l, err = net.Listen(network, addr) }); e != nil {
			return nil, e
		}
		return l, err
	}})
	go s.AttachTUN(dev)
	startOpenVPNClientProto(t, f, dir, cNS, "v2tcp", "192.168.79.1", "tcp-client", "tls-crypt-v2 v2client.key")
	if _, ok := clientByName(s, "v2tcp"); !ok {
		t.Fatalf("clients %+v", s.Clients())
	}
	netns.Run(t, cNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.8.0.1")
}
