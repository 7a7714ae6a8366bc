package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/wrap"
)

// `wirelane ovpn genkey` writes keys that read back, with the metadata
// asked for, refuses to overwrite, and (with openvpn installed) trades
// keys with `openvpn --genkey` both ways.
func TestOvpnGenkey(t *testing.T) {
	dir := t.TempDir()
	srv := filepath.Join(dir, "v2server.key")
	if _, errOut, code := wl(t, "", "ovpn", "genkey", "tls-crypt-v2-server", srv); code != 0 {
		t.Fatalf("server key: %d %s", code, errOut)
	}
	if fi, err := os.Stat(srv); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("server key file: %v %v", fi, err)
	}
	if _, _, code := wl(t, "", "ovpn", "genkey", "tls-crypt-v2-server", srv); code == 0 {
		t.Fatal("overwrote an existing key")
	}
	out, errOut, code := wl(t, "", "ovpn", "genkey", "--server-key", srv, "--metadata", "YWxpY2U=", "tls-crypt-v2-client")
	if code != 0 {
		t.Fatalf("client key: %d %s", code, errOut)
	}
	ck, err := wrap.ParseV2ClientKey([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(srv)
	sk, err := wrap.ParseV2ServerKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, md, err := sk.UnwrapClientKey(ck.WKc); err != nil || wrap.DescribeMetadata(md) != "user YWxpY2U=" {
		t.Fatalf("unwrap: %v %s", err, wrap.DescribeMetadata(md))
	}
	out, _, _ = wl(t, "", "ovpn", "genkey", "tls-crypt")
	if _, err := wrap.ParseStaticKey([]byte(out)); err != nil {
		t.Fatalf("tls-crypt key: %v", err)
	}
	for _, args := range [][]string{{"tls-crypt-v2-client"}, {"--metadata", "!!", "--server-key", srv, "tls-crypt-v2-client"}, {"bogus"}, {"--server-key", srv, "tls-crypt"}} {
		if _, errOut, code := wl(t, "", append([]string{"ovpn", "genkey"}, args...)...); code == 0 || errOut == "" {
			t.Errorf("%q: exit %d", args, code)
		}
	}
	if _, err := exec.LookPath("openvpn"); err != nil {
		t.Log("openvpn not installed: keys not traded with openvpn --genkey")
		return
	}
	// openvpn wraps a client key with Wirelane's server key ...
	cmd := exec.Command("openvpn", "--tls-crypt-v2", srv, "--genkey", "tls-crypt-v2-client", filepath.Join(dir, "ov-client.key"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openvpn with our server key: %v\n%s", err, out)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "ov-client.key"))
	if oc, err := wrap.ParseV2ClientKey(b); err != nil {
		t.Fatal(err)
	} else if _, _, err := sk.UnwrapClientKey(oc.WKc); err != nil {
		t.Fatalf("openvpn's client key: %v", err)
	}
	// ... and Wirelane wraps one with openvpn's server key (the end-to-end
	// tests in ovpn/client connect to openvpn with such keys).
	ovSrv := filepath.Join(dir, "ov-server.key")
	if out, err := exec.Command("openvpn", "--genkey", "tls-crypt-v2-server", ovSrv).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wlCli := filepath.Join(dir, "wl-client.key")
	if _, errOut, code := wl(t, "", "ovpn", "genkey", "--server-key", ovSrv, "tls-crypt-v2-client", wlCli); code != 0 {
		t.Fatalf("client key from openvpn's server key: %s", errOut)
	}
	b, _ = os.ReadFile(ovSrv)
	osk, err := wrap.ParseV2ServerKey(b)
	if err != nil {
		t.Fatalf("openvpn's server key: %v", err)
	}
	b, _ = os.ReadFile(wlCli)
	wc, err := wrap.ParseV2ClientKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, md, err := osk.UnwrapClientKey(wc.WKc); err != nil || !strings.HasPrefix(wrap.DescribeMetadata(md), "timestamp ") {
		t.Fatalf("unwrap with openvpn's server key: %v %s", err, wrap.DescribeMetadata(md))
	}
}
