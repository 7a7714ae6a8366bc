package ovpntunnel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func useStatusDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "run", "wirelane")
	old := StatusDir
	StatusDir = dir
	t.Cleanup(func() { StatusDir = old })
	return dir
}

// A published status is listed with what the snapshot said, rewritten
// as counters change, readable by root and its group only, and gone
// after close.
func TestStatusPublishListRemove(t *testing.T) {
	dir := useStatusDir(t)
	var rx atomic.Uint64
	since := time.Now().Add(-time.Minute).Truncate(time.Second)
	pub, err := publishStatus(func() TunnelStatus {
		return TunnelStatus{Kind: KindClient, Interface: "tun7", Remote: "192.0.2.1:1194", Proto: "UDPv4",
			Cipher: "AES-256-GCM", Address: "10.8.0.2/24", Since: since, RxBytes: rx.Load(), TxBytes: 2048}
	}, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.close()
	for path, want := range map[string]os.FileMode{dir: 0o755 | os.ModeDir, pub.path: 0o640} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v, %v; want %v", path, fi.Mode(), err, want)
		}
	}
	rx.Store(5 << 20)
	var got []TunnelStatus
	deadline := time.Now().Add(3 * time.Second)
	for {
		if got, err = Status(); err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0].RxBytes == 5<<20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Fatalf("Status() = %+v", got)
	}
	st := got[0]
	if st.PID != os.Getpid() || st.Interface != "tun7" || st.RxBytes != 5<<20 || !st.Since.Equal(since) || st.Address != "10.8.0.2/24" {
		t.Fatalf("status %+v", st)
	}
	var b strings.Builder
	if err := FormatStatus(&b, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"interface: tun7 (openvpn-client", "remote: UDPv4 192.0.2.1:1194", "cipher: AES-256-GCM",
		"transfer: 5.00 MiB received, 2.00 KiB sent"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("formatted status lacks %q:\n%s", want, b.String())
		}
	}
	pub.close()
	if _, err := os.Stat(pub.path); !os.IsNotExist(err) {
		t.Fatalf("status file still there after close: %v", err)
	}
	if got, err := Status(); err != nil || len(got) != 0 {
		t.Fatalf("Status() after close = %+v, %v", got, err)
	}
}

// Files of processes that are gone, or no longer updated, are skipped; a
// corrupt file is an error naming it; no directory means no tunnels.
func TestStatusSkipsStaleEntries(t *testing.T) {
	dir := useStatusDir(t)
	if got, err := Status(); err != nil || len(got) != 0 {
		t.Fatalf("Status() without a directory = %+v, %v", got, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, st TunnelStatus) {
		b, _ := json.Marshal(st)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	me := os.Getpid()
	write(fmt.Sprintf("ovpn-%d-1.json", me), TunnelStatus{Kind: KindServer, PID: 0x3ffffff0, Interface: "gone", Updated: time.Now()})
	write(fmt.Sprintf("ovpn-%d-2.json", me), TunnelStatus{Kind: KindServer, PID: me, Interface: "stale", Updated: time.Now().Add(-time.Hour)})
	write(fmt.Sprintf("ovpn-%d-3.json", me), TunnelStatus{Kind: KindServer, PID: me, Interface: "live", Updated: time.Now(),
		Clients: []ClientStatus{{CommonName: "c1", Address: "10.8.0.2"}}})
	// A process killed with SIGKILL leaves its file and control socket:
	// both go at the next look.
	dead := fmt.Sprintf("ovpn-%d", 0x3ffffff0)
	write(dead+".json", TunnelStatus{Kind: KindClient, PID: 0x3ffffff0, Interface: "killed", Updated: time.Now()})
	if err := os.WriteFile(filepath.Join(dir, dead+".sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Status()
	if err != nil || len(got) != 1 || got[0].Interface != "live" || len(got[0].Clients) != 1 {
		t.Fatalf("Status() = %+v, %v", got, err)
	}
	for _, f := range []string{dead + ".json", dead + ".sock"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s of a process that is gone was not removed: %v", f, err)
		}
	}
	var b strings.Builder
	FormatStatus(&b, got)
	if !strings.Contains(b.String(), "clients: 1") || !strings.Contains(b.String(), "client: c1") {
		t.Fatalf("server status text:\n%s", b.String())
	}
	corrupt := fmt.Sprintf("ovpn-%d-4.json", me)
	if err := os.WriteFile(filepath.Join(dir, corrupt), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Status(); err == nil || !strings.Contains(err.Error(), corrupt) {
		t.Fatalf("corrupt file: %v", err)
	}
}

// address6 is an added, optional field: absent without IPv6, so readers
// of the earlier schema see the same JSON, and printed when present.
func TestStatusAddress6(t *testing.T) {
	st := TunnelStatus{Kind: KindClient, Interface: "tun7", Address: "10.8.0.2/24"}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "address6") || !strings.Contains(string(b), `"address":"10.8.0.2/24"`) {
		t.Fatalf("IPv4-only status JSON: %s", b)
	}
	st.Address6 = "fd42:42::1000/64"
	st.Clients = []ClientStatus{{CommonName: "a", Address: "10.8.0.3", Address6: "fd42:42::1001"}}
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"address6":"fd42:42::1000/64"`, `"address6":"fd42:42::1001"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("status JSON lacks %s: %s", want, b)
		}
	}
	var text strings.Builder
	FormatStatus(&text, []TunnelStatus{st})
	for _, want := range []string{"  address: 10.8.0.2/24\n  address6: fd42:42::1000/64\n", "    address6: fd42:42::1001\n"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("formatted status lacks %q:\n%s", want, text.String())
		}
	}
}

// TestTwoTunnelsOfOneProcessEachHaveAStatus: the service runs several
// tunnels in one process; each keeps its own status file.
func TestTwoTunnelsOfOneProcessEachHaveAStatus(t *testing.T) {
	useStatusDir(t)
	var pubs []*statusPublisher
	for _, ifname := range []string{"tun1", "tun2"} {
		pub, err := publishStatus(func() TunnelStatus { return TunnelStatus{Kind: KindClient, Interface: ifname} }, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.close()
		pubs = append(pubs, pub)
	}
	got, err := Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Interface != "tun1" || got[1].Interface != "tun2" {
		t.Fatalf("Status = %+v", got)
	}
	pubs[0].close()
	if got, _ := Status(); len(got) != 1 || got[0].Interface != "tun2" {
		t.Errorf("after the first one closed: %+v", got)
	}
}
