package ovpncli

// Wirelane's client against a real OpenVPN 2.6 server, as a user runs it:
//
//	oic (client side)                          ois (server side)
//	  wlc0 10.11.0.2  <- wirelane connect        ovs0 10.11.0.1  <- openvpn --server
//	  c1 192.168.84.2  ==========veth==========  s1 192.168.84.1
//
// UDP, AES-256-GCM, tls-crypt. The test pings the server's tunnel address
// from the client namespace, then runs iperf3 TCP upload and download (-R)
// across the tunnel and checks that both moved data.

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/netns"
	"github.com/wirelane/wirelane/ovpn/internal/testpki"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func TestE2EConnectToOpenVPNServerIperf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test needs root (network namespaces and TUN devices)")
	}
	for _, c := range []string{"openvpn", "iperf3", "ping"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("end-to-end test needs %s on PATH (apt-get install openvpn iperf3 iputils-ping): %v", c, err)
		}
	}
	netns.Need(t)

	pki := testpki.New(t, "Wirelane Interop CA")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "cli1", x509.ExtKeyUsageClientAuth)
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*11 + 3)
	}
	dir := t.TempDir()
	oldDir := StatusDir
	StatusDir = filepath.Join(dir, "run")
	t.Cleanup(func() { StatusDir = oldDir })
	files := map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey), "ta.key": string(k.Format()),
		"server.conf": "port 1194\nproto udp4\nlocal 192.168.84.1\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.11.0.0 255.255.255.0\nca ca.crt\ncert server.crt\nkey server.key\ndh none\ntls-crypt ta.key\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.84.1 1194 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			"<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n" +
			"<tls-crypt>\n" + string(k.Format()) + "</tls-crypt>\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	srvNS, cliNS := netns.New(t, "ois"), netns.New(t, "oic")
	netns.Veth(t, srvNS, "s1", cliNS, "c1")
	netns.Run(t, srvNS, "ip", "addr", "add", "192.168.84.1/24", "dev", "s1")
	netns.Run(t, cliNS, "ip", "addr", "add", "192.168.84.2/24", "dev", "c1")

	// The real OpenVPN server; its output is kept for the failure log.
	ovs := &helper{done: make(chan struct{})}
	ovs.cmd = netns.Command(srvNS, "openvpn", "--cd", dir, "--config", "server.conf")
	ovs.cmd.Stdout, ovs.cmd.Stderr = &ovs.out, &ovs.out
	if err := ovs.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { ovs.err = ovs.cmd.Wait(); close(ovs.done) }()
	t.Cleanup(func() {
		ovs.cmd.Process.Signal(os.Interrupt)
		select {
		case <-ovs.done:
		case <-time.After(3 * time.Second):
			ovs.cmd.Process.Kill()
			<-ovs.done
		}
		if t.Failed() {
			t.Logf("openvpn server output:\n%s", ovs.out.String())
		}
	})
	ovs.waitFor(t, "Initialization Sequence Completed", 10*time.Second)

	cli := startHelper(t, cliNS, "connect", "--dev", "wlc0", "--mtu", "1400", filepath.Join(dir, "cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	if want := "connected: address 10.11.0.2/24, gateway 10.11.0.1, cipher AES-256-GCM"; !strings.Contains(cli.out.String(), want) {
		t.Fatalf("connect output lacks %q:\n%s", want, cli.out.String())
	}
	t.Cleanup(func() { cli.interrupt(t) }) // runs before the server stops
	// The server's view: it verified cli1 and agreed on the data cipher.
	ovs.waitFor(t, "cli1/192.168.84.2", 5*time.Second)
	ovs.waitFor(t, "Data Channel: cipher 'AES-256-GCM'", 5*time.Second)

	netns.Run(t, cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.11.0.1")

	port := 5400
	iperf := func(reverse bool) float64 {
		t.Helper()
		port++
		p := strconv.Itoa(port)
		srv := netns.Start(t, srvNS, "iperf3", "-s", "-1", "-B", "10.11.0.1", "-p", p)
		args := []string{"iperf3", "-c", "10.11.0.1", "-p", p, "-t", "2", "-J", "--connect-timeout", "2000"}
		if reverse {
			args = append(args, "-R")
		}
		var bps float64
		// Retried while the server is still binding its listening socket.
		netns.Eventually(t, 5*time.Second, "iperf3 "+strings.Join(args[1:], " "), func() error {
			select {
			case <-srv.Exited():
				return fmt.Errorf("iperf3 server exited early: %s", srv.Output())
			default:
			}
			out, err := netns.Try(cliNS, nil, args...)
			var res struct {
				End struct {
					SumReceived struct {
						Bytes         float64 `json:"bytes"`
						BitsPerSecond float64 `json:"bits_per_second"`
					} `json:"sum_received"`
				} `json:"end"`
				Error string `json:"error"`
			}
			if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
				return fmt.Errorf("%v: %s", jerr, out)
			}
			if res.Error != "" || err != nil {
				return fmt.Errorf("iperf3: %s %v", res.Error, err)
			}
			if res.End.SumReceived.BitsPerSecond <= 0 || res.End.SumReceived.Bytes <= 0 {
				t.Fatalf("iperf3 %s moved no data: %s", strings.Join(args[1:], " "), out)
			}
			bps = res.End.SumReceived.BitsPerSecond
			return nil
		})
		if _, err := srv.Wait(t, 5*time.Second); err != nil {
			t.Fatalf("iperf3 server: %v\n%s", err, srv.Output())
		}
		return bps
	}
	up := iperf(false)
	down := iperf(true)
	t.Logf("iperf3 TCP through wirelane connect -> openvpn 2.6 (AES-256-GCM, tls-crypt): upload %.0f Mbit/s, download %.0f Mbit/s", up/1e6, down/1e6)
}
