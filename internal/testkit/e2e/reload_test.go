package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// hub is the reload tests' topology: a tunnel A brought up with `wirelane
// up` in its namespace, and up to four peers B..E, each a tunnel of its own
// in a namespace joined to A's by a veth (10.9.N.1 on A's side, 10.9.N.2 on
// the peer's):
//
//	nsA: A 10.70.0.1/24, :51000 --veth 10.9.N.0/24-- nsN: N 10.70.0.N/24, :5100N
type hub struct {
	dir   string
	nsA   *netns.NS
	a     string // A's interface name
	key   wgtypes.Key
	peers map[int]*hubPeer
}

type hubPeer struct {
	ns     *netns.NS
	ifname string
	key    wgtypes.Key
}

// cli runs the wirelane CLI in ns and returns its output and error.
func cli(ns *netns.NS, args ...string) (string, error) {
	return netns.Try(ns, nil, append([]string{filepath.Join(binDir, "wirelane")}, args...)...)
}

// up brings the file up in ns with the CLI and takes it down at cleanup.
func cliUp(t *testing.T, ns *netns.NS, file, ifname string) {
	t.Helper()
	t.Cleanup(func() {
		cli(ns, "down", file)
		stopDaemon(t, ns, ifname)
	})
	if out, err := cli(ns, "up", file); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func newKey(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newHub makes A and the peers ns (2 = B ... 5 = E); A's file lists the
// peers in aPeers, with the extra allowed IPs of extra.
func newHub(t *testing.T, peers []int, aPeers []int, extra map[int]string) *hub {
	t.Helper()
	need(t, implCLI, "iperf3")
	h := &hub{dir: t.TempDir(), nsA: netns.New(t, "wlra"), a: netns.Unique("wl"), key: newKey(t), peers: map[int]*hubPeer{}}
	for _, n := range peers {
		p := &hubPeer{ns: netns.New(t, "wlr"+strconv.Itoa(n)), ifname: netns.Unique("wl"), key: newKey(t)}
		h.peers[n] = p
		netns.Veth(t, h.nsA, fmt.Sprintf("vr%d", n), p.ns, "vr")
		netns.Run(t, h.nsA, "ip", "addr", "add", fmt.Sprintf("10.9.%d.1/24", n), "dev", fmt.Sprintf("vr%d", n))
		netns.Run(t, p.ns, "ip", "addr", "add", fmt.Sprintf("10.9.%d.2/24", n), "dev", "vr")
		conf := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = 10.70.0.%d/24\n\n[Peer]\nPublicKey = %s\nAllowedIPs = 10.70.0.1/32, 10.80.0.1/32\nEndpoint = 10.9.%d.1:51000\n",
			p.key, 51000+n, n, h.key.PublicKey(), n)
		file := h.write(t, h.dir, p.ifname, conf)
		cliUp(t, p.ns, file, p.ifname)
	}
	cliUp(t, h.nsA, h.write(t, h.dir, h.a, h.conf("Address = 10.70.0.1/24", aPeers, extra)), h.a)
	return h
}

// conf is A's file with the peers listed (allowed IPs 10.70.0.N/32 plus
// extra[N]).
func (h *hub) conf(addr string, peers []int, extra map[int]string) string {
	s := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = 51000\n%s\n", h.key, addr)
	for _, n := range peers {
		allowed := fmt.Sprintf("10.70.0.%d/32", n)
		if x := extra[n]; x != "" {
			allowed += ", " + x
		}
		s += fmt.Sprintf("\n[Peer]\nPublicKey = %s\nAllowedIPs = %s\nEndpoint = 10.9.%d.2:%d\n", h.peers[n].key.PublicKey(), allowed, n, 51000+n)
	}
	return s
}

func (h *hub) write(t *testing.T, dir, ifname, conf string) string {
	t.Helper()
	file := filepath.Join(dir, ifname+".conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// peerField returns one peer's column of `wg show IF FIELD` (by public key).
func peerField(t *testing.T, ifname, field string, k wgtypes.Key) string {
	t.Helper()
	for _, line := range strings.Split(netns.Run(t, nil, "wg", "show", ifname, field), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == k.PublicKey().String() {
			return strings.Join(f[1:], " ")
		}
	}
	return ""
}

var ifIndexRE = regexp.MustCompile(`^\d+: `)

// tunnelState is what a tunnel is made of, with its name replaced by IF:
// the device's configuration, its MTU, addresses, routes in every table,
// the policy rules and the nftables ruleset of its namespace.
func tunnelState(t *testing.T, ns *netns.NS, ifname string) string {
	t.Helper()
	norm := func(s string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			l = ifIndexRE.ReplaceAllString(strings.ReplaceAll(l, ifname, "IF"), "")
			if l != "" && !strings.Contains(l, "fe80::") {
				out = append(out, strings.Join(strings.Fields(l), " "))
			}
		}
		slices.Sort(out)
		return out
	}
	var parts []string
	parts = append(parts, "wg: "+strings.Join(norm(netns.Run(t, nil, "wg", "showconf", ifname)), " | "))
	parts = append(parts, "mtu "+strings.TrimSpace(netns.Run(t, ns, "cat", "/sys/class/net/"+ifname+"/mtu")))
	for _, l := range norm(netns.Run(t, ns, "ip", "-o", "addr", "show", "dev", ifname)) {
		parts = append(parts, "addr "+l)
	}
	for _, l := range norm(netns.Run(t, ns, "ip", "route", "show", "table", "all", "dev", ifname)) {
		parts = append(parts, "route "+l)
	}
	for _, l := range norm(netns.Run(t, ns, "ip", "-6", "route", "show", "table", "all", "dev", ifname)) {
		parts = append(parts, "route6 "+l)
	}
	parts = append(parts, "rules: "+strings.Join(norm(netns.Run(t, ns, "ip", "rule")), " | "))
	if out, err := netns.Try(ns, nil, "nft", "list", "ruleset"); err == nil {
		parts = append(parts, "nft: "+strings.Join(norm(out), " | "))
	}
	return strings.Join(parts, "\n")
}

// TestReloadKeepsSessions reloads A, with a ping to B every 10 ms and an
// iperf3 TCP stream to it, from
// a file that removes C (and its network's route), gives D a new network, adds E and adds an
// address: no ping to B is lost, the stream goes on, B's handshake and receive counter stay,
// E answers, C is gone, and A is then field by field what `up` of the new
// file makes in a fresh namespace.
func TestReloadKeepsSessions(t *testing.T) {
	h := newHub(t, []int{2, 3, 4, 5}, []int{2, 3, 4}, map[int]string{3: "10.73.0.0/16"})
	for _, n := range []int{2, 3, 4} {
		netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", fmt.Sprintf("10.70.0.%d", n))
	}
	b := h.peers[2].key
	hsBefore := peerField(t, h.a, "latest-handshakes", b)
	rxBefore, _ := strconv.ParseInt(strings.Fields(peerField(t, h.a, "transfer", b))[0], 10, 64)

	newConf := h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2, 4, 5}, map[int]string{4: "10.74.0.0/24"})
	file := h.write(t, h.dir, h.a, newConf)
	iperfd := netns.Start(t, h.peers[2].ns, "iperf3", "-s", "-1", "-B", "10.70.0.2", "-p", "5301")
	time.Sleep(200 * time.Millisecond)
	stream := netns.Start(t, h.nsA, "iperf3", "-c", "10.70.0.2", "-p", "5301", "-t", "2", "-b", "50M", "-J")
	pinger := netns.Start(t, h.nsA, "ping", "-i", "0.01", "-c", "100", "-W", "1", "10.70.0.2")
	time.Sleep(300 * time.Millisecond)
	out, err := cli(h.nsA, "reload", file)
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	t.Logf("reload:\n%s", out)
	ping, _ := pinger.Wait(t, 10*time.Second)
	if !strings.Contains(ping, " 0% packet loss") {
		t.Errorf("pings to the unchanged peer were lost during the reload:\n%s", ping)
	}
	if out, err := stream.Wait(t, 10*time.Second); err != nil || !strings.Contains(out, `"sum_received"`) || strings.Contains(out, `"error"`) {
		t.Errorf("the iperf3 stream to the unchanged peer broke during the reload: %v\n%s", err, out)
	}
	iperfd.Wait(t, 5*time.Second)
	if hs := peerField(t, h.a, "latest-handshakes", b); hs != hsBefore {
		t.Errorf("B's latest handshake %s -> %s: the reload restarted its session", hsBefore, hs)
	}
	if rx, _ := strconv.ParseInt(strings.Fields(peerField(t, h.a, "transfer", b))[0], 10, 64); rx <= rxBefore {
		t.Errorf("B's receive counter %d -> %d: reset by the reload", rxBefore, rx)
	}
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.5")
	// C's route is gone too: the comparison with a fresh up below sees it.
	if peerField(t, h.a, "endpoints", h.peers[3].key) != "" {
		t.Errorf("C is still a peer of A")
	}

	// A fresh up of the same file, under another name, elsewhere.
	nsF := netns.New(t, "wlrf")
	fresh := netns.Unique("wl")
	cliUp(t, nsF, h.write(t, t.TempDir(), fresh, newConf), fresh)
	got, want := tunnelState(t, h.nsA, h.a), tunnelState(t, nsF, fresh)
	if got != want {
		t.Errorf("after reload:\n%s\nfresh up of the same file:\n%s", got, want)
	}
	// Nothing left to change.
	if out, err := cli(h.nsA, "reload", "--dry-run", file); err != nil || !strings.Contains(out, "no change") {
		t.Errorf("a second reload would change: %v\n%s", err, out)
	}
}

// TestReloadThatFailsChangesNothing reloads a broken file and a file whose
// last change fails (its new listen port is taken), after an address and
// a peer were added: the tunnel is left as it was, byte for byte. A
// reload with no change makes no netlink change at all (ip monitor sees
// nothing) and leaves the device's state alone; a dry run prints the plan
// (a new private key says every session restarts) and changes nothing.
func TestReloadThatFailsChangesNothing(t *testing.T) {
	h := newHub(t, []int{2, 3}, []int{2}, nil)
	// No IPv6 in A's namespace: its link-local addresses finishing
	// duplicate address detection would be netlink events of their own.
	netns.Run(t, h.nsA, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	before := tunnelState(t, h.nsA, h.a)
	dumpBefore := netns.Run(t, nil, "wg", "show", h.a, "latest-handshakes")

	t.Run("no change", func(t *testing.T) {
		mon := netns.Start(t, h.nsA, "ip", "monitor", "link", "address", "route", "rule")
		time.Sleep(100 * time.Millisecond)
		out, err := cli(h.nsA, "reload", filepath.Join(h.dir, h.a+".conf"))
		if err != nil || !strings.Contains(out, "no change") {
			t.Errorf("reload of the same file: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
		mon.Cmd.Process.Signal(syscall.SIGTERM)
		if events := strings.TrimSpace(mon.Output()); events != "" {
			t.Errorf("a reload with no change changed the namespace:\n%s", events)
		}
		if got := netns.Run(t, nil, "wg", "show", h.a, "latest-handshakes"); got != dumpBefore {
			t.Errorf("handshakes %q -> %q", dumpBefore, got)
		}
	})

	t.Run("broken file", func(t *testing.T) {
		file := h.write(t, t.TempDir(), h.a, h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2, 3}, nil)+"AllowedIPs = 10.300.0.0/16\n")
		out, err := cli(h.nsA, "reload", file)
		if err == nil || !strings.Contains(out, file+":") {
			t.Errorf("reload of a broken file: %v, want an error at FILE:LINE:\n%s", err, out)
		}
		if after := tunnelState(t, h.nsA, h.a); after != before {
			t.Errorf("after:\n%s\nbefore:\n%s", after, before)
		}
	})

	t.Run("dry run of a new private key", func(t *testing.T) {
		conf := strings.Replace(h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2, 3}, nil), h.key.String(), newKey(t).String(), 1)
		file := h.write(t, t.TempDir(), h.a, conf)
		out, err := cli(h.nsA, "reload", "--dry-run", file)
		for _, want := range []string{"reload would make 3 change(s)", "every peer's session restarts", "add peer " + h.peers[3].key.PublicKey().String(), "add address 10.80.0.1/24"} {
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("reload --dry-run: %v, want %q in:\n%s", err, want, out)
			}
		}
		if strings.Contains(out, "[#]") {
			t.Errorf("a dry run reported changes as made:\n%s", out)
		}
		if after := tunnelState(t, h.nsA, h.a); after != before {
			t.Errorf("a dry run changed the tunnel:\n%s\nbefore:\n%s", after, before)
		}
	})

	t.Run("fails half-way", func(t *testing.T) {
		taken := udpInNetns(t, h.nsA, 51099)
		defer taken.Close()
		conf := strings.Replace(h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2, 3}, map[int]string{2: "10.72.0.0/24"}), "ListenPort = 51000", "ListenPort = 51099", 1)
		file := h.write(t, t.TempDir(), h.a, conf)
		out, err := cli(h.nsA, "reload", file)
		if err == nil || !strings.Contains(out, "51099") {
			t.Errorf("reload onto a taken port: %v, want it to fail and say why:\n%s", err, out)
		}
		t.Logf("%s", out)
		if after := tunnelState(t, h.nsA, h.a); after != before {
			t.Errorf("after:\n%s\nbefore:\n%s", after, before)
		}
		netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	})
}

// udpInNetns binds a UDP socket on port (both families) in ns.
func udpInNetns(t *testing.T, ns *netns.NS, port int) net.PacketConn {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := vnetns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := vnetns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer vnetns.Set(orig)
	c, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReloadDefaultRoute reloads A into a full tunnel (B allowed 0.0.0.0/0)
// and back: the fwmark, policy rules, route table and nftables table are
// what a fresh up of each file makes, B keeps its session, and the way
// back leaves A as it was before.
func TestReloadDefaultRoute(t *testing.T) {
	h := newHub(t, []int{2}, []int{2}, nil)
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	b := h.peers[2].key
	hsBefore := peerField(t, h.a, "latest-handshakes", b)
	before := tunnelState(t, h.nsA, h.a)
	orig := filepath.Join(h.dir, h.a+".conf")

	fullConf := h.conf("Address = 10.70.0.1/24", []int{2}, map[int]string{2: "0.0.0.0/0"})
	full := h.write(t, t.TempDir(), h.a, fullConf)
	if out, err := cli(h.nsA, "reload", full); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	nsF := netns.New(t, "wlrf")
	fresh := netns.Unique("wl")
	cliUp(t, nsF, h.write(t, t.TempDir(), fresh, fullConf), fresh)
	if got, want := tunnelState(t, h.nsA, h.a), tunnelState(t, nsF, fresh); got != want {
		t.Errorf("after reload into a full tunnel:\n%s\nfresh up of the same file:\n%s", got, want)
	}

	out, err := cli(h.nsA, "reload", orig)
	if err != nil {
		t.Fatalf("reload back: %v\n%s", err, out)
	}
	t.Logf("reload back:\n%s", out)
	if after := tunnelState(t, h.nsA, h.a); after != before {
		t.Errorf("after reloading back:\n%s\nbefore:\n%s", after, before)
	}
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	if hs := peerField(t, h.a, "latest-handshakes", b); hs != hsBefore {
		t.Errorf("B's latest handshake %s -> %s: a reload restarted its session", hsBefore, hs)
	}
}

// gatewayConf is A as a gateway file named ifname, with one site per
// entry of sites (peer number -> its networks besides its tunnel address).
func (h *hub) gatewayConf(ifname string, order []int, sites map[int]string) string {
	s := fmt.Sprintf("[interface]\nname = %q\nprivate_key = %q\nlisten_port = 51000\naddresses = [\"10.70.0.1/24\"]\n", ifname, h.key)
	for _, n := range order {
		nets := fmt.Sprintf("%q", fmt.Sprintf("10.70.0.%d/32", n))
		if x := sites[n]; x != "" {
			nets += fmt.Sprintf(", %q", x)
		}
		s += fmt.Sprintf("\n[[site]]\nname = \"site%d\"\npublic_key = %q\nendpoint = \"10.9.%d.2:%d\"\nnetworks = [%s]\n", n, h.peers[n].key.PublicKey(), n, 51000+n, nets)
	}
	return s
}

// TestReloadGateway reloads a gateway with a site added and a network
// moved from one site to another, with a ping every 10 ms and an iperf3
// stream to a site that stays: no ping is lost, the stream goes on, the
// sessions of the sites that stay go on, the new site answers, and the gateway is what `gateway up` of the
// new file makes in a fresh namespace.
func TestReloadGateway(t *testing.T) {
	h := newHub(t, []int{2, 3, 4}, nil, nil)
	gw := filepath.Join(h.dir, "gw.toml")
	write := func(path, conf string) {
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// newHub brought A up from a wg-quick file with no peer; the gateway
	// file takes it over from there.
	write(gw, h.gatewayConf(h.a, []int{2, 3}, map[int]string{2: "10.72.0.0/24"}))
	if out, err := cli(h.nsA, "gateway", "reload", gw); err != nil {
		t.Fatalf("gateway reload: %v\n%s", err, out)
	}
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.3")
	hs := map[int]string{2: peerField(t, h.a, "latest-handshakes", h.peers[2].key), 3: peerField(t, h.a, "latest-handshakes", h.peers[3].key)}

	newConf := func(name string) string {
		return h.gatewayConf(name, []int{2, 3, 4}, map[int]string{3: "10.72.0.0/24"})
	}
	write(gw, newConf(h.a))
	// A ping every 10 ms and an iperf3 stream to site 2, which stays.
	iperfd := netns.Start(t, h.peers[2].ns, "iperf3", "-s", "-1", "-B", "10.70.0.2", "-p", "5302")
	time.Sleep(200 * time.Millisecond)
	stream := netns.Start(t, h.nsA, "iperf3", "-c", "10.70.0.2", "-p", "5302", "-t", "2", "-b", "50M", "-J")
	pinger := netns.Start(t, h.nsA, "ping", "-i", "0.01", "-c", "100", "-W", "1", "10.70.0.2")
	time.Sleep(300 * time.Millisecond)
	out, err := cli(h.nsA, "reload", gw)
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if ping, _ := pinger.Wait(t, 10*time.Second); !strings.Contains(ping, " 0% packet loss") {
		t.Errorf("pings to the site that stays were lost during the reload:\n%s", ping)
	}
	if out, err := stream.Wait(t, 10*time.Second); err != nil || !strings.Contains(out, `"sum_received"`) || strings.Contains(out, `"error"`) {
		t.Errorf("the iperf3 stream to the site that stays broke during the reload: %v\n%s", err, out)
	}
	iperfd.Wait(t, 5*time.Second)
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.4")
	for n, before := range hs {
		if got := peerField(t, h.a, "latest-handshakes", h.peers[n].key); got != before {
			t.Errorf("site %d's latest handshake %s -> %s: the reload restarted its session", n, before, got)
		}
	}
	if got := peerField(t, h.a, "allowed-ips", h.peers[3].key); !strings.Contains(got, "10.72.0.0/24") {
		t.Errorf("site 3's allowed IPs %q: the network did not move to it", got)
	}

	nsF := netns.New(t, "wlrf")
	fresh := netns.Unique("wl")
	freshFile := filepath.Join(t.TempDir(), "gw.toml")
	write(freshFile, newConf(fresh))
	t.Cleanup(func() {
		cli(nsF, "gateway", "down", freshFile)
		stopDaemon(t, nsF, fresh)
	})
	if out, err := cli(nsF, "gateway", "up", freshFile); err != nil {
		t.Fatalf("gateway up: %v\n%s", err, out)
	}
	if got, want := tunnelState(t, h.nsA, h.a), tunnelState(t, nsF, fresh); got != want {
		t.Errorf("after reload:\n%s\nfresh gateway up of the same file:\n%s", got, want)
	}
}
