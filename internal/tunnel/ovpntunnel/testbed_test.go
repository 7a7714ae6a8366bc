package ovpntunnel

// Shared set-up of the end-to-end tests (e2e_test.go, iperf_e2e_test.go,
// throughput_test.go):
//
//	client namespace                         server namespace
//	  cliIf NET.2/24  ==========veth==========  srvIf NET.1/24
//
// plus a throw-away CA with a server and a client certificate written to
// a working directory (ca.crt, server.crt, server.key) that also holds the
// tests' configuration files and the status directory. Processes run
// inside the namespaces: this test binary re-executed as `wirelane ovpn
// connect|serve` (startHelper), Debian's openvpn (startOpenVPN) and iperf3
// (runIperf).

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// testbed is two namespaces joined by a veth pair and the certificates of
// one server and one client.
type testbed struct {
	dir          string    // working directory (certificates, configurations)
	srvNS, cliNS *netns.NS // server and client side
	srvIP        string    // the server side's veth address (NET.1)
	caPEM        []byte
	pki          *testpki.PKI // the CA, for more certificates and CRLs
	cliCert      []byte       // client certificate (common name testbedConfig.client)
	cliKey       []byte
}

// testbedConfig names what a test's testbed is built from.
type testbedConfig struct {
	ca, client   string   // CA name and client common name
	srvNS, cliNS string   // namespace name prefixes
	srvIf, cliIf string   // veth end names
	net          string   // the /24 of the veth link, e.g. "192.168.81"
	need         []string // commands the test runs besides ip
}

// newTestbed skips the test without root, /dev/net/tun or c.need, and
// builds the testbed. StatusDir points into the working directory until
// the test ends.
func newTestbed(t *testing.T, c testbedConfig) *testbed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test needs root (network namespaces and TUN devices)")
	}
	netns.Need(t, c.need...)
	pki := testpki.New(t, c.ca)
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, c.client, x509.ExtKeyUsageClientAuth)
	tb := &testbed{dir: t.TempDir(), caPEM: pki.CAPEM, pki: pki, cliCert: cliCert, cliKey: cliKey, srvIP: c.net + ".1"}
	oldDir := StatusDir
	StatusDir = filepath.Join(tb.dir, "run")
	t.Cleanup(func() { StatusDir = oldDir })
	tb.write(t, map[string]string{"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey)})
	tb.srvNS, tb.cliNS = netns.New(t, c.srvNS), netns.New(t, c.cliNS)
	netns.Veth(t, tb.srvNS, c.srvIf, tb.cliNS, c.cliIf)
	netns.Run(t, tb.srvNS, "ip", "addr", "add", c.net+".1/24", "dev", c.srvIf)
	netns.Run(t, tb.cliNS, "ip", "addr", "add", c.net+".2/24", "dev", c.cliIf)
	return tb
}

// serverCreds are the server configuration lines naming the testbed's
// certificate files.
const serverCreds = "ca ca.crt\ncert server.crt\nkey server.key\ndh none\n"

// clientInline is the client's CA, certificate and key as inline blocks.
func (tb *testbed) clientInline() string {
	return "<ca>\n" + string(tb.caPEM) + "</ca>\n<cert>\n" + string(tb.cliCert) + "</cert>\n<key>\n" + string(tb.cliKey) + "</key>\n"
}

// path returns the path of a file in the working directory.
func (tb *testbed) path(name string) string { return filepath.Join(tb.dir, name) }

// write creates files (name to content) in the working directory.
func (tb *testbed) write(t *testing.T, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(tb.path(name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading
// test.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// helper is a process in a namespace whose output the test watches: this
// test binary re-executed as `wirelane ovpn connect|serve`, or openvpn.
type helper struct {
	name string // for the failure log
	cmd  *exec.Cmd
	out  syncBuffer
	done chan struct{}
	err  error // set before done closes
}

// start runs h.cmd; when the test ends a still running process gets
// stop (SIGINT for openvpn, a kill for a helper the test forgot) and its
// output is logged if the test failed.
func (h *helper) start(t *testing.T, stop os.Signal) {
	t.Helper()
	h.done = make(chan struct{})
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			h.cmd.Process.Signal(stop)
			select {
			case <-h.done:
			case <-time.After(3 * time.Second):
				h.cmd.Process.Kill()
				<-h.done
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", h.name, h.out.String())
		}
	})
}

// startHelper runs `wirelane ovpn <which> args...` in ns.
func startHelper(t *testing.T, ns *netns.NS, which string, args ...string) *helper {
	t.Helper()
	return startHelperEnv(t, ns, nil, which, args...)
}

// startHelperEnv is startHelper with env (KEY=value) added to the
// environment, replacing inherited values of the same keys.
func startHelperEnv(t *testing.T, ns *netns.NS, env []string, which string, args ...string) *helper {
	t.Helper()
	h := &helper{name: which, cmd: netns.Command(ns, append([]string{os.Args[0]}, args...)...)}
	h.cmd.Env = append(os.Environ(), "WIRELANE_OVPNCLI_HELPER="+which, "WIRELANE_OVPNCLI_STATUS_DIR="+StatusDir)
	h.cmd.Env = append(h.cmd.Env, env...)
	h.start(t, os.Kill)
	return h
}

// startOpenVPN runs `openvpn --config conf` in ns from the working
// directory and waits until it has initialised. It is stopped with SIGINT
// when the test ends.
func (tb *testbed) startOpenVPN(t *testing.T, ns *netns.NS, conf string) *helper {
	t.Helper()
	h := &helper{name: "openvpn " + conf, cmd: netns.Command(ns, "openvpn", "--cd", tb.dir, "--config", conf)}
	h.start(t, os.Interrupt)
	h.waitFor(t, "Initialization Sequence Completed", 20*time.Second)
	return h
}

// pingZeros sends three pings of 1200 zero bytes from the client
// namespace to addr and fails unless all come back: a peer with
// allow-compression yes sends them compressed, so they arrive only if
// the Wirelane end decompresses.
func (tb *testbed) pingZeros(t *testing.T, addr string) {
	t.Helper()
	if out := netns.Run(t, tb.cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "1200", "-p", "00", addr); !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("compressed pings lost:\n%s", out)
	}
}

// checkNoCompressedDrops fails if the Wirelane end h reported a dropped
// compressed packet.
func checkNoCompressedDrops(t *testing.T, h *helper) {
	t.Helper()
	if out := h.out.String(); strings.Contains(out, "compressed packets") || strings.Contains(out, "could not be decompressed") {
		t.Fatalf("%s dropped compressed packets:\n%s", h.name, out)
	}
}

func (h *helper) waitFor(t *testing.T, what string, d time.Duration) {
	t.Helper()
	netns.Eventually(t, d, fmt.Sprintf("output %q", what), func() error {
		if strings.Contains(h.out.String(), what) {
			return nil
		}
		select {
		case <-h.done:
			return fmt.Errorf("exited (%v):\n%s", h.err, h.out.String())
		default:
			return fmt.Errorf("not yet")
		}
	})
}

// interrupt sends SIGINT and waits for a clean exit.
func (h *helper) interrupt(t *testing.T) {
	t.Helper()
	h.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-h.done:
		if h.err != nil {
			t.Fatalf("exit after SIGINT: %v\n%s", h.err, h.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGINT:\n%s", h.out.String())
	}
}

// iperfResult is what one iperf3 TCP run measured.
type iperfResult struct {
	Mbps        float64 // received, Mbit/s
	Bytes       float64 // received
	Retransmits int     // by the sender
}

// iperfPort hands out a fresh port for every iperf3 server.
var iperfPort = 5300

// runIperf runs one iperf3 TCP test of secs seconds from the client
// namespace to an iperf3 server started in the server namespace on addr;
// reverse (-R) measures server to client.
func (tb *testbed) runIperf(t *testing.T, addr string, secs int, reverse bool) iperfResult {
	t.Helper()
	iperfPort++
	p := strconv.Itoa(iperfPort)
	srv := netns.Start(t, tb.srvNS, "iperf3", "-s", "-1", "-B", addr, "-p", p)
	args := []string{"iperf3", "-c", addr, "-p", p, "-t", strconv.Itoa(secs), "-J", "--connect-timeout", "2000"}
	if reverse {
		args = append(args, "-R")
	}
	var r iperfResult
	// Retried while the server is still binding its listening socket.
	netns.Eventually(t, 5*time.Second, "iperf3 "+strings.Join(args[1:], " "), func() error {
		select {
		case <-srv.Exited():
			return fmt.Errorf("iperf3 server exited early: %s", srv.Output())
		default:
		}
		out, err := netns.Try(tb.cliNS, nil, args...)
		var res struct {
			End struct {
				SumReceived struct {
					Bytes         float64 `json:"bytes"`
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
				SumSent struct {
					Retransmits int `json:"retransmits"`
				} `json:"sum_sent"`
			} `json:"end"`
			Error string `json:"error"`
		}
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
			return fmt.Errorf("%v: %s", jerr, out)
		}
		if res.Error != "" || err != nil {
			return fmt.Errorf("iperf3: %s %v", res.Error, err)
		}
		r = iperfResult{Mbps: res.End.SumReceived.BitsPerSecond / 1e6, Bytes: res.End.SumReceived.Bytes,
			Retransmits: res.End.SumSent.Retransmits}
		return nil
	})
	if _, err := srv.Wait(t, 5*time.Second); err != nil {
		t.Fatalf("iperf3 server: %v\n%s", err, srv.Output())
	}
	return r
}
