package e2e

// The bed of the fleet tests: an etcd cluster (Debian's etcd-server, client
// TLS on) and gateways in their own namespaces, each with a LAN behind:
//
//	nsW ("WAN"): etcd members on 172.31.0.1:2379, :22379, :32379 (client,
//	     TLS), peers on 127.0.0.1 (plain, inside nsW); a veth per gateway
//	  |  172.30.N.1/24 <-> 172.30.N.2/24
//	G_N: the gateway (wirelane gateway up, [fleet]), UDP 51820 on
//	  |  172.30.N.2; 10.100.N.1/24 toward its LAN; forwarding on
//	L_N: 10.100.N.2/24, default route via 10.100.N.1
//
// Site N announces 10.100.N.0/24 and the endpoint 172.30.N.2:51820.

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/internal/tunnel/fleet"
)

// etcdAddr is where the members serve clients, inside nsW.
const etcdAddr = "172.31.0.1"

type fleetBed struct {
	t      *testing.T
	dir    string
	nsW    *netns.NS
	pki    *testpki.PKI
	ca     string // CA file
	member []*etcdMember
	gws    map[int]*fleetGW
	prefix string
	ttl    int
	// location is each site's location ("" = none), set before addGateway.
	location map[int]string
}

type etcdMember struct {
	name       string
	client     string // client URL
	peer       string // peer URL
	dataDir    string
	proc       *netns.Proc
	cert, key  string
	initialAll string
}

type fleetGW struct {
	n      int
	ns     *netns.NS
	lan    *netns.NS
	ifname string
	file   string
	key    wgtypes.Key
	proc   *netns.Proc
}

// newFleetBed starts an etcd cluster of members members.
func newFleetBed(t *testing.T, members int) *fleetBed {
	netns.Need(t, "etcd", "ip", "ping", "wg")
	if err := buildErr["wirelane"]; err != nil {
		t.Fatal(err)
	}
	b := &fleetBed{t: t, dir: t.TempDir(), nsW: netns.New(t, "wlfw"), pki: testpki.New(t, "fleet-ca"), gws: map[int]*fleetGW{}, location: map[int]string{},
		prefix: "/wirelane/test-" + netns.Unique("f"), ttl: 3}
	netns.Run(t, b.nsW, "ip", "addr", "add", etcdAddr+"/32", "dev", "lo")
	netns.Run(t, b.nsW, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	b.ca = b.write("ca.pem", b.pki.CAPEM)
	var initial []string
	for i := 0; i < members; i++ {
		m := &etcdMember{name: fmt.Sprintf("m%d", i), client: fmt.Sprintf("https://%s:%d", etcdAddr, 2379+i*10000),
			peer: fmt.Sprintf("http://127.0.0.1:%d", 2380+i*10000), dataDir: filepath.Join(b.dir, fmt.Sprintf("m%d", i))}
		c, k := b.pki.Both(t, m.name, netip.MustParseAddr(etcdAddr), netip.MustParseAddr("127.0.0.1"))
		m.cert, m.key = b.write(m.name+".pem", c), b.write(m.name+"-key.pem", k)
		initial = append(initial, m.name+"="+m.peer)
		b.member = append(b.member, m)
	}
	for _, m := range b.member {
		m.initialAll = strings.Join(initial, ",")
		b.startMember(m)
	}
	b.eventuallyHealthy(20 * time.Second)
	return b
}

func (b *fleetBed) write(name string, data []byte) string {
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		b.t.Fatal(err)
	}
	return p
}

// startMember starts (or restarts, on its data directory) one member.
func (b *fleetBed) startMember(m *etcdMember) {
	m.proc = netns.Start(b.t, b.nsW, "etcd", "--name", m.name, "--data-dir", m.dataDir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", m.initialAll, "--initial-cluster-state", "new", "--initial-cluster-token", filepath.Base(b.dir),
		"--cert-file", m.cert, "--key-file", m.key, "--client-cert-auth", "--trusted-ca-file", b.ca,
		"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn")
}

// killMember stops a member with SIGKILL.
func (b *fleetBed) killMember(m *etcdMember) {
	m.proc.Cmd.Process.Kill()
	<-m.proc.Exited()
}

// client returns a client certificate and key file for cn.
func (b *fleetBed) client(cn string) (cert, key string) {
	c, k := b.pki.Valid(b.t, cn, x509.ExtKeyUsageClientAuth)
	return b.write(cn+".pem", c), b.write(cn+"-key.pem", k)
}

// endpoints are the members' client URLs.
func (b *fleetBed) endpoints() []string {
	var e []string
	for _, m := range b.member {
		e = append(e, m.client)
	}
	return e
}

// eventuallyHealthy waits until every member answers.
func (b *fleetBed) eventuallyHealthy(d time.Duration) {
	b.t.Helper()
	cert, key := b.client("health")
	netns.Eventually(b.t, d, "the etcd cluster answers", func() error {
		args := []string{"etcdctl", "--endpoints", strings.Join(b.endpoints(), ","), "--cacert", b.ca, "--cert", cert, "--key", key,
			"--command-timeout", "2s", "endpoint", "health", "--cluster"}
		out, err := netns.Try(b.nsW, []string{"ETCDCTL_API=3"}, args...)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// etcdctl runs etcdctl in nsW against the cluster.
func (b *fleetBed) etcdctl(args ...string) (string, error) {
	cert, key := filepath.Join(b.dir, "health.pem"), filepath.Join(b.dir, "health-key.pem")
	base := []string{"etcdctl", "--endpoints", strings.Join(b.endpoints(), ","), "--cacert", b.ca, "--cert", cert, "--key", key, "--command-timeout", "3s"}
	return netns.Try(b.nsW, []string{"ETCDCTL_API=3"}, append(base, args...)...)
}

// addGateway makes the namespaces of site n and writes its file.
func (b *fleetBed) addGateway(n int) *fleetGW {
	t := b.t
	g := &fleetGW{n: n, ns: netns.New(t, fmt.Sprintf("wlfg%d", n)), lan: netns.New(t, fmt.Sprintf("wlfl%d", n)), ifname: netns.Unique("wf"), key: newKey(t)}
	netns.Veth(t, b.nsW, fmt.Sprintf("w%d", n), g.ns, "wan")
	netns.Run(t, b.nsW, "ip", "addr", "add", fmt.Sprintf("172.30.%d.1/24", n), "dev", fmt.Sprintf("w%d", n))
	netns.Run(t, g.ns, "ip", "addr", "add", fmt.Sprintf("172.30.%d.2/24", n), "dev", "wan")
	netns.Run(t, g.ns, "ip", "route", "add", "default", "via", fmt.Sprintf("172.30.%d.1", n))
	netns.Veth(t, g.ns, "lan", g.lan, "up0")
	netns.Run(t, g.ns, "ip", "addr", "add", fmt.Sprintf("10.100.%d.1/24", n), "dev", "lan")
	netns.Run(t, g.lan, "ip", "addr", "add", fmt.Sprintf("10.100.%d.2/24", n), "dev", "up0")
	netns.Run(t, g.lan, "ip", "route", "add", "default", "via", fmt.Sprintf("10.100.%d.1", n))
	netns.Run(t, g.ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	cert, key := b.client(fmt.Sprintf("site%d", n))
	q := func(ss []string) string {
		for i := range ss {
			ss[i] = fmt.Sprintf("%q", ss[i])
		}
		return strings.Join(ss, ", ")
	}
	conf := fmt.Sprintf(`[interface]
name = %q
private_key = %q
listen_port = 51820

[fleet]
endpoints = [%s]
ca_file = %q
cert_file = %q
key_file = %q
prefix = %q
site = "site%d"
public_endpoints = ["172.30.%d.2:51820"]
networks = ["10.100.%d.0/24"]
lease_ttl = %d
`, g.ifname, g.key.String(), q(b.endpoints()), b.ca, cert, key, b.prefix, n, n, n, b.ttl)
	if l := b.location[n]; l != "" {
		conf += fmt.Sprintf("location = %q\n", l)
	}
	g.file = b.write(fmt.Sprintf("site%d.toml", n), []byte(conf))
	b.gws[n] = g
	t.Cleanup(func() {
		if g.proc != nil {
			g.proc.Cmd.Process.Kill()
			<-g.proc.Exited()
			if t.Failed() {
				out := g.proc.Output()
				t.Logf("gateway %d's agent:\n%s", n, out[max(0, len(out)-4000):])
			}
		}
		cli(g.ns, "gateway", "down", g.file)
		stopDaemon(t, g.ns, g.ifname)
	})
	return g
}

// start runs `wirelane gateway up` for g (the agent in the foreground).
func (b *fleetBed) start(g *fleetGW) {
	env := []string{"WIRELANE_FLEET_DIR=" + filepath.Join(b.dir, "status"), "WIRELANE_FLEET_CACHE_DIR=" + filepath.Join(b.dir, "cache")}
	// The agent's heap, in text (agentHeap reads it); FLEET_HEAP_PROFILE
	// asks for the profile go tool pprof reads best instead.
	heap := agentHeapFile(b, g)
	if p := os.Getenv("FLEET_HEAP_PROFILE"); p != "" {
		heap = fmt.Sprintf("%s.site%d", p, g.n)
	}
	env = append(env, "WIRELANE_FLEET_HEAP_PROFILE="+heap)
	g.proc = netns.StartEnv(b.t, g.ns, env, filepath.Join(binDir, "wirelane"), "gateway", "up", g.file)
}

// kill stops g's agent with SIGKILL; the gateway's daemon stays.
func (b *fleetBed) kill(g *fleetGW) {
	g.proc.Cmd.Process.Signal(syscall.SIGKILL)
	<-g.proc.Exited()
}

// show runs `wirelane gateway show` for g.
func (b *fleetBed) show(g *fleetGW) string {
	out, err := netns.Try(g.ns, []string{"WIRELANE_FLEET_DIR=" + filepath.Join(b.dir, "status")}, filepath.Join(binDir, "wirelane"), "gateway", "show", g.file)
	if err != nil {
		b.t.Errorf("gateway show: %v", err)
	}
	return out
}

// status reads g's agent status file.
func (b *fleetBed) status(g *fleetGW) fleet.Status {
	os.Setenv("WIRELANE_FLEET_DIR", filepath.Join(b.dir, "status"))
	defer os.Unsetenv("WIRELANE_FLEET_DIR")
	st, _, err := fleet.ReadStatus(g.ifname)
	if err != nil {
		b.t.Fatal(err)
	}
	return st
}

// ping checks that LAN from reaches LAN to.
func (b *fleetBed) ping(from, to int) error {
	_, err := netns.Try(b.gws[from].lan, nil, "ping", "-c", "1", "-W", "1", fmt.Sprintf("10.100.%d.2", to))
	return err
}

// allReach checks that every LAN of sites reaches every other.
func (b *fleetBed) allReach(sites []int) error {
	for _, i := range sites {
		for _, j := range sites {
			if i != j {
				if err := b.ping(i, j); err != nil {
					return fmt.Errorf("LAN %d does not reach LAN %d: %v", i, j, err)
				}
			}
		}
	}
	return nil
}

// hasPeer reports whether gateway g has site n's gateway as a peer.
func (b *fleetBed) hasPeer(g *fleetGW, n int) bool {
	out, err := netns.Try(nil, nil, "wg", "show", g.ifname, "peers")
	return err == nil && strings.Contains(out, b.gws[n].key.PublicKey().String())
}
