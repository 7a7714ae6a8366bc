package bench

// OpenVPN: Wirelane's client and server (`wirelane ovpn connect` and
// `serve`) against OpenVPN 2.6's, both tunnels up at once between the same
// two namespaces (the topology and configuration files of ovpnbed, which
// the ovpntunnel package's TestThroughputVsOpenVPN shares), AES-256-GCM.
// One pair of namespaces per transport (UDP and TCP), both set up before
// the first measurement. Each repeat runs every case on both
// implementations in turn, rotating which goes first: iperf3 TCP from the
// client to the server ("up") and back (-R, "down"), and a flood ping from
// the client to the server's tunnel address.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wirelane/wirelane/internal/tools/ovpnbed"
)

// SectionOpenVPN is the OpenVPN comparison.
const SectionOpenVPN = "openvpn"

// EngineOpenVPN is OpenVPN 2.6 (Debian's openvpn; the report notes the
// exact version).
const EngineOpenVPN = "openvpn-2.6"

// openvpnCase is one measurement over one transport.
type openvpnCase struct {
	name    string
	proto   string // "udp" or "tcp"
	reverse bool   // iperf3 -R: server to client
	ping    bool   // ping -f instead of iperf3
}

var openvpnCases = []openvpnCase{
	{name: "UDP, TCP up", proto: "udp"},
	{name: "UDP, TCP down", proto: "udp", reverse: true},
	{name: "UDP, flood ping", proto: "udp", ping: true},
	{name: "TCP, TCP up", proto: "tcp"},
	{name: "TCP, TCP down", proto: "tcp", reverse: true},
	{name: "TCP, flood ping", proto: "tcp", ping: true},
}

// openvpnImpls are the two implementations: engine name and the server's
// tunnel address.
var openvpnImpls = []struct{ engine, addr string }{
	{EngineWirelane, ovpnbed.WirelaneAddr},
	{EngineOpenVPN, ovpnbed.OpenVPNAddr},
}

// openvpnSteps counts the progress steps of the section.
func openvpnSteps(cfg Config) int {
	return netnsSetupSteps + cfg.Repeats*len(openvpnCases)*len(openvpnImpls)
}

// ovpnBed is one transport's pair of namespaces with both tunnels and an
// iperf3 server on each tunnel's server address.
type ovpnBed struct {
	proto      string
	srvNS      string
	cliNS      string
	children   []*child
	namespaces []string
	unregister func() // from addCleanup
}

func (b *ovpnBed) teardown() {
	b.unregister()
	for i := len(b.children) - 1; i >= 0; i-- {
		b.children[i].stop()
	}
	for _, ns := range b.namespaces {
		run("", "ip", "netns", "del", ns)
	}
}

// setupOVPNBed builds the namespaces for proto in dir (which holds the
// certificates) and brings both tunnels up.
func setupOVPNBed(proto, tag, wirelane, dir string, creds ovpnbed.Creds) (b *ovpnBed, err error) {
	b = &ovpnBed{proto: proto, srvNS: fmt.Sprintf("wlb%s-o%ss", tag, proto), cliNS: fmt.Sprintf("wlb%s-o%sc", tag, proto)}
	b.unregister = addCleanup(b.teardown)
	defer func() {
		if err != nil {
			b.teardown()
			err = fmt.Errorf("openvpn over %s: %w", proto, err)
		}
	}()
	wd := filepath.Join(dir, proto)
	if err := os.MkdirAll(wd, 0o700); err != nil {
		return b, err
	}
	confs, err := ovpnbed.Configs(ovpnbed.Options{Proto: proto, ClientInline: creds.ClientInline()})
	if err != nil {
		return b, err
	}
	for name, body := range creds.Files() {
		confs[name] = body
	}
	for name, body := range confs {
		if err := os.WriteFile(filepath.Join(wd, name), []byte(body), 0o600); err != nil {
			return b, err
		}
	}
	for _, ns := range []string{b.srvNS, b.cliNS} {
		if _, err := run("", "ip", "netns", "add", ns); err != nil {
			return b, err
		}
		b.namespaces = append(b.namespaces, ns)
		if _, err := run(ns, "ip", "link", "set", "lo", "up"); err != nil {
			return b, err
		}
	}
	vs, vc := fmt.Sprintf("wlb%so%ss", tag, proto[:1]), fmt.Sprintf("wlb%so%sc", tag, proto[:1])
	steps := [][]string{
		{"", "ip", "link", "add", vs, "netns", b.srvNS, "type", "veth", "peer", "name", vc, "netns", b.cliNS},
		{b.srvNS, "ip", "addr", "add", ovpnbed.ServerLink + "/24", "dev", vs},
		{b.cliNS, "ip", "addr", "add", ovpnbed.Net + ".2/24", "dev", vc},
		{b.srvNS, "ip", "link", "set", vs, "up"},
		{b.cliNS, "ip", "link", "set", vc, "up"},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return b, err
		}
	}
	start := func(ns string, args ...string) (*child, error) {
		c, err := startChildIn(wd, []string{"WIRELANE_SOCKET=off"}, append([]string{"ip", "netns", "exec", ns}, args...)...)
		if err != nil {
			return nil, err
		}
		b.children = append(b.children, c)
		return c, nil
	}
	// The servers first; the clients retry until theirs answers.
	wlSrv, err := start(b.srvNS, wirelane, "ovpn", "serve", filepath.Join(wd, ovpnbed.WirelaneServerConf))
	if err != nil {
		return b, err
	}
	ovSrv, err := start(b.srvNS, "openvpn", "--cd", wd, "--config", ovpnbed.OpenVPNServerConf)
	if err != nil {
		return b, err
	}
	time.Sleep(500 * time.Millisecond)
	wlCli, err := start(b.cliNS, wirelane, "ovpn", "connect", "--dev", ovpnbed.WirelaneDev, "--mtu", strconv.Itoa(ovpnbed.WirelaneMTU),
		"--dns", "off", filepath.Join(wd, ovpnbed.WirelaneClientConf))
	if err != nil {
		return b, err
	}
	ovCli, err := start(b.cliNS, "openvpn", "--cd", wd, "--config", ovpnbed.OpenVPNClientConf)
	if err != nil {
		return b, err
	}
	procs := []*child{wlSrv, ovSrv, wlCli, ovCli}
	for _, im := range openvpnImpls {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := run(b.cliNS, "ping", "-c", "1", "-W", "1", im.addr); err == nil {
				break
			}
			for _, c := range procs {
				if c.exited() {
					return b, fmt.Errorf("%q exited: %s", strings.Join(c.cmd.Args, " "), lastLines(c.out.String(), 5))
				}
			}
			if time.Now().After(deadline) {
				return b, fmt.Errorf("%s tunnel carries no ping within 30s; client output: %s", im.engine, lastLines(map[bool]*child{true: wlCli, false: ovCli}[im.engine == EngineWirelane].out.String(), 5))
			}
			time.Sleep(200 * time.Millisecond)
		}
		srv, err := start(b.srvNS, "iperf3", "-s", "-B", im.addr)
		if err != nil {
			return b, err
		}
		time.Sleep(200 * time.Millisecond)
		if srv.exited() {
			return b, fmt.Errorf("iperf3 server on %s exited: %s", im.addr, srv.out.String())
		}
	}
	return b, nil
}

// lastLines returns the last n lines of s, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// buildWirelane builds cmd/wirelane into dir.
func buildWirelane(dir string) (string, error) {
	mod, err := run("", "go", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "wirelane")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/wirelane")
	cmd.Dir = filepath.Dir(strings.TrimSpace(mod))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/wirelane: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// openvpnSection sets up both transports and alternates the two
// implementations over the cases.
func openvpnSection(r *Report, cfg Config, p *progress) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root to create namespaces and TUN devices", ErrSkipped)
	}
	for _, tool := range []string{"ip", "openvpn", "iperf3", "ping", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: needs %s on PATH", ErrSkipped, tool)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: needs /dev/net/tun: %v", ErrSkipped, err)
	}
	if out, _ := exec.Command("openvpn", "--version").Output(); len(out) > 0 {
		r.Note("openvpn: %s is %s", EngineOpenVPN, strings.SplitN(string(out), "\n", 2)[0])
	}
	dir, err := os.MkdirTemp("", "wirelane-bench-ovpn-")
	if err != nil {
		return err
	}
	defer addCleanup(func() { os.RemoveAll(dir) })()
	defer os.RemoveAll(dir)
	p.step("openvpn: build wirelane")
	wirelane, err := buildWirelane(dir)
	if err != nil {
		return err
	}
	creds, err := ovpnbed.NewCreds("Wirelane Bench CA", "client")
	if err != nil {
		return err
	}
	p.step("openvpn: set up namespaces and tunnels")
	tag := netnsTag()
	beds := map[string]*ovpnBed{}
	defer func() {
		for _, b := range beds {
			b.teardown()
		}
	}()
	for _, proto := range []string{"udp", "tcp"} {
		b, err := setupOVPNBed(proto, tag, wirelane, dir, creds)
		if err != nil {
			r.Note("%v (transport left out)", err)
			continue
		}
		beds[proto] = b
	}
	if len(beds) == 0 {
		return errors.New("no OpenVPN transport could be set up")
	}
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, c := range openvpnCases {
			b := beds[c.proto]
			if b == nil {
				continue
			}
			for i := range openvpnImpls {
				im := openvpnImpls[(i+rep)%len(openvpnImpls)]
				p.step(fmt.Sprintf("openvpn %s %s, repeat %d/%d", c.name, im.engine, rep+1, cfg.Repeats))
				if c.ping {
					rt, err := floodPingIn(b.cliNS, im.addr, cfg.Duration)
					if err != nil {
						return fmt.Errorf("%s %s: %w", im.engine, c.name, err)
					}
					r.Add(SectionOpenVPN, c.name, MetricRoundTrips, im.engine, HigherIsBetter, rt)
					continue
				}
				var extra []string
				if c.reverse {
					extra = []string{"-R"}
				}
				res, err := iperfIn(b.cliNS, im.addr, extra, false, cfg.Duration)
				if err != nil {
					return fmt.Errorf("%s %s: %w", im.engine, c.name, err)
				}
				r.Add(SectionOpenVPN, c.name, MetricGbps, im.engine, HigherIsBetter, res.bitsPerSecond/1e9)
			}
		}
	}
	return nil
}
