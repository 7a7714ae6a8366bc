package service

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/curve25519"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/tun/memtun"
)

// wgKey returns a private key (hex, for IpcSet) and its public key (hex
// and base64).
func wgKey(t *testing.T) (privHex, pubHex, pubB64 string) {
	var k [32]byte
	rand.Read(k[:])
	k[0] &= 248
	k[31] = k[31]&127 | 64
	pub, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k[:]), hex.EncodeToString(pub), base64.StdEncoding.EncodeToString(pub)
}

// ipv4 returns an IPv4/UDP packet from src to dst.
func ipv4(src, dst [4]byte, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, 17
	copy(p[12:], src[:])
	copy(p[16:], dst[:])
	binary.BigEndian.PutUint16(p[20:], 1000)
	binary.BigEndian.PutUint16(p[22:], 2000)
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	copy(p[28:], payload)
	return p
}

// serveUAPI answers UAPI on dir/NAME.sock for d, as the daemon does.
func serveUAPI(t *testing.T, dir, name string, d *device.Device) net.Listener {
	l, err := net.Listen("unix", filepath.Join(dir, name+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); uapi.Serve(c, d) }()
		}
	}()
	return l
}

// TestUAPIHostReadsRealDevices runs two Wirelane devices over an in-memory
// network, each behind a UAPI socket as `wirelaned` serves it, and reads
// them through UAPIHost and the service.
func TestUAPIHostReadsRealDevices(t *testing.T) {
	dir := t.TempDir()
	_, ba, bb := conntest.NewPair()
	ta, tb := memtun.New("wla", 1420), memtun.New("wlb", 1420)
	da, db := device.NewDevice(ta, ba, device.Options{}), device.NewDevice(tb, bb, device.Options{})
	t.Cleanup(func() { da.Close(); db.Close() })
	if err := da.Up(); err != nil {
		t.Fatal(err)
	}
	if err := db.Up(); err != nil {
		t.Fatal(err)
	}
	privA, pubA, pubA64 := wgKey(t)
	privB, pubB, pubB64 := wgKey(t)
	if err := uapi.SetText(da, "private_key="+privA+"\npublic_key="+pubB+"\nendpoint="+bb.Addr().String()+"\nallowed_ip=10.0.0.2/32\n"); err != nil {
		t.Fatal(err)
	}
	if err := uapi.SetText(db, "private_key="+privB+"\npublic_key="+pubA+"\nendpoint="+ba.Addr().String()+"\nallowed_ip=10.0.0.1/32\nallowed_ip=fd00::1/128\n"); err != nil {
		t.Fatal(err)
	}
	serveUAPI(t, dir, "wla", da)
	lb := serveUAPI(t, dir, "wlb", db)
	// A stale socket (nobody answers) and a file that is no socket.
	l, _ := net.Listen("unix", filepath.Join(dir, "gone.sock"))
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	h := NewUAPIHost(dir)
	ts := startService(t, h, Config{}, roleRoot)
	st := ts.events()
	for range 2 {
		if e, _ := st.next(); e.Type != EventTunnel || !e.Initial || e.State != StateUp {
			t.Fatalf("snapshot: %+v", e)
		}
	}

	if err := ta.Inject(ipv4([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, []byte("hello through the tunnel"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tb.Outbound():
	case <-time.After(10 * time.Second):
		t.Fatal("the packet did not cross the tunnel")
	}

	code, body, _ := ts.do("GET", "/v1/tunnels", "")
	list := decodeJSON[[]Tunnel](t, body)
	if code != 200 || len(list) != 2 || list[0].Name != "wla" || list[1].Name != "wlb" {
		t.Fatalf("list: %d %s", code, body)
	}
	a := list[0]
	if a.Kind != KindWireGuard || a.State != StateUp || a.PublicKey != pubA64 || len(a.Peers) != 1 {
		t.Fatalf("wla: %+v", a)
	}
	p := a.Peers[0]
	if p.PublicKey != pubB64 || p.Endpoint == nil || *p.Endpoint != bb.Addr() || p.LatestHandshake == nil || p.TxBytes == 0 || a.TxBytes != p.TxBytes {
		t.Fatalf("wla's peer: %+v", p)
	}
	if b := list[1]; len(b.Peers[0].AllowedIPs) != 2 || b.Peers[0].RxBytes == 0 {
		t.Fatalf("wlb's peer: %+v", b.Peers[0])
	}
	if strings.Contains(strings.ToLower(string(body)), strings.ToLower(privA[:16])) {
		t.Fatal("the private key reached the answer")
	}
	// The handshake and the transfer reach the stream.
	if e := st.nextOf(EventPeer); e.Change != ChangeHandshake {
		t.Fatalf("peer event: %+v", e)
	}
	if e := st.nextOf(EventTransfer); e.TxBytes == nil && e.RxBytes == nil {
		t.Fatalf("transfer event: %+v", e)
	}
	_, body, _ = ts.do("GET", "/metrics", "")
	if !strings.Contains(string(body), `wireguard_peer_transmit_bytes_total{device="wla",public_key="`+pubB64+`"}`) {
		t.Errorf("metrics lack wla's peer:\n%s", body)
	}
	// The engine's plan (internal/sys/procs) as gauges, from the device
	// through the UAPI counters.
	plan := procs.Current()
	for _, want := range []string{
		"# TYPE wirelane_engine_gomaxprocs gauge",
		fmt.Sprintf(`wirelane_engine_gomaxprocs{tunnel="wla"} %d`, runtime.GOMAXPROCS(0)),
		"# TYPE wirelane_engine_crypto_workers gauge",
		fmt.Sprintf(`wirelane_engine_crypto_workers{tunnel="wla"} %d`, plan.CryptoWorkers),
		"# TYPE wirelane_engine_inline_crypto_batch gauge",
		fmt.Sprintf(`wirelane_engine_inline_crypto_batch{tunnel="wlb"} %d`, plan.InlineCrypto),
		// The process's memory (this test's own, which hosts the devices).
		"# TYPE wirelane_engine_go_heap_live_bytes gauge",
		"# TYPE wirelane_engine_go_stack_bytes gauge",
		"# TYPE wirelane_engine_go_gc_cycles_total counter",
		"# TYPE wirelane_engine_go_goroutines gauge",
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	promtool(t, body)

	if code, body, _ := ts.do("POST", "/v1/tunnels/wla/down", ""); code != 501 {
		t.Errorf("down through the UAPI host: %d %s, want 501", code, body)
	}
	if code, _, _ := ts.do("POST", "/v1/tunnels/gone/up", ""); code != 404 {
		t.Errorf("up of a stale socket's name: %d, want 404", code)
	}

	// A daemon that stops (as wirelaned does: the device closes, the
	// socket goes): tunnel down, then tunnels removed.
	db.Close()
	lb.Close()
	if e := st.nextOf(EventTunnel); e.Tunnel != "wlb" || e.State != StateDown {
		t.Fatalf("want wlb down, got %+v", e)
	}
	if e := st.nextOf(EventTunnels); e.Tunnel != "wlb" || e.Change != ChangeRemoved {
		t.Fatalf("want wlb removed, got %+v", e)
	}
}

func TestParseGetRefusesBadAnswers(t *testing.T) {
	for _, c := range []string{
		"",
		"listen_port=1\n",
		"errno=5\n\n",
		"endpoint=1.2.3.4:5\nerrno=0\n\n",
		"public_key=zz\nerrno=0\n\n",
		"private_key=00\nerrno=0\n\n",
		"listen_port=70000\nerrno=0\n\n",
		"noequals\n",
		"errno=0\nmore\n",
	} {
		if _, err := parseGet(strings.NewReader(c)); err == nil {
			t.Errorf("parseGet(%q) accepted it", c)
		}
	}
	tun, err := parseGet(strings.NewReader("listen_port=51820\nfwmark=1\npublic_key=" + strings.Repeat("ab", 32) + "\npreshared_key=" + strings.Repeat("11", 32) + "\npersistent_keepalive_interval=25\nrx_bytes=5\nnew_key=x\nerrno=0\n\n"))
	if err != nil || tun.ListenPort != 51820 || tun.FwMark != 1 || len(tun.Peers) != 1 || tun.RxBytes != 5 {
		t.Fatalf("%+v %v", tun, err)
	}
	if p := tun.Peers[0]; !p.HasPresharedKey || p.PersistentKeepalive != 25 {
		t.Errorf("peer: %+v, want a preshared key and a keepalive of 25 s", p)
	}
}

func FuzzParseGet(f *testing.F) {
	f.Add([]byte("private_key=" + strings.Repeat("a0", 32) + "\nlisten_port=1\npublic_key=" + strings.Repeat("ab", 32) + "\nendpoint=[::1]:5\nlast_handshake_time_sec=5\nallowed_ip=10.0.0.0/8\nerrno=0\n\n"))
	f.Add([]byte("errno=0\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tun, err := parseGet(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		var sum uint64
		for _, p := range tun.Peers {
			if p.PublicKey == "" {
				t.Fatal("a peer without a public key")
			}
			sum += p.RxBytes
		}
		if sum != tun.RxBytes {
			t.Fatal("the tunnel's total is not its peers' sum")
		}
	})
}
