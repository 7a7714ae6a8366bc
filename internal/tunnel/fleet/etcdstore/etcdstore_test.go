package etcdstore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
)

// freePort returns a loopback TCP port nobody listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd runs a one-member etcd (Debian's etcd-server) on loopback with
// client TLS, in a temporary directory, and returns a Store on it.
func startEtcd(t *testing.T) *Store {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("no etcd on PATH (apt install etcd-server)")
	}
	dir := t.TempDir()
	pki := testpki.New(t, "ca")
	w := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := w("ca.pem", pki.CAPEM)
	sc, sk := pki.Both(t, "etcd", netip.MustParseAddr("127.0.0.1"))
	cc, ck := pki.Valid(t, "client", x509.ExtKeyUsageClientAuth)
	client := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cmd := exec.Command("etcd", "--name", "m", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "m="+peer,
		"--cert-file", w("s.pem", sc), "--key-file", w("s-key.pem", sk), "--client-cert-auth", "--trusted-ca-file", ca,
		"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "--log-level", "warn")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s, err := New(Config{Endpoints: []string{client}, CAFile: ca, CertFile: w("c.pem", cc), KeyFile: w("c-key.pem", ck)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _, err := s.List(ctx, "/")
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd does not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEtcdStore(t *testing.T) {
	s := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, rev, err := s.List(ctx, "/f/")
	if err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx, "/f/", rev)
	lease, err := s.Grant(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "/f/a", []byte("1"), lease, store.IfAbsent); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "/f/a", []byte("2"), lease, store.IfAbsent); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("a second create: %v, want ErrFailed", err)
	}
	kv, found, err := s.Get(ctx, "/f/a")
	if err != nil || !found || string(kv.Value) != "1" || kv.Lease != lease {
		t.Fatalf("get: %+v %v %v", kv, found, err)
	}
	if err := s.Put(ctx, "/f/a", []byte("3"), lease, store.Cond(kv.ModRev)); err != nil {
		t.Fatal(err)
	}
	next := func() store.WatchResponse {
		select {
		case r := <-w:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no watch event in 5s")
		}
		return store.WatchResponse{}
	}
	if r := next(); r.Err != nil || len(r.Events) == 0 || r.Events[0].Type != store.Put || string(r.Events[0].KV.Value) != "1" {
		t.Fatalf("first event %+v", r)
	}
	if err := s.KeepAlive(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	var del bool
	for !del {
		r := next()
		for _, e := range r.Events {
			del = del || e.Type == store.Delete && e.KV.Key == "/f/a"
		}
	}
	if err := s.KeepAlive(ctx, lease); !errors.Is(err, store.ErrNoLease) {
		t.Fatalf("keep-alive of a revoked lease: %v, want ErrNoLease", err)
	}
	if err := s.Put(ctx, "/f/b", []byte("x"), lease, store.Always); !errors.Is(err, store.ErrNoLease) {
		t.Fatalf("put on a revoked lease: %v, want ErrNoLease", err)
	}
}
