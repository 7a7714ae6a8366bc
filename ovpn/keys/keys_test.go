package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"hash"
	"math/big"
	"net"
	"testing"
	"time"
)

// refHMAC is HMAC written out from RFC 2104 (ipad/opad), independent of
// crypto/hmac.
func refHMAC(h func() hash.Hash, key, msg []byte) []byte {
	const block = 64
	if len(key) > block {
		d := h()
		d.Write(key)
		key = d.Sum(nil)
	}
	k := make([]byte, block)
	copy(k, key)
	inner, outer := h(), h()
	for i := range k {
		inner.Write([]byte{k[i] ^ 0x36})
		outer.Write([]byte{k[i] ^ 0x5c})
	}
	inner.Write(msg)
	outer.Write(inner.Sum(nil))
	return outer.Sum(nil)
}

// refPRF is the TLS 1.0 PRF computed block by block with refHMAC.
func refPRF(secret []byte, label string, seed []byte, n int) []byte {
	ls := append([]byte(label), seed...)
	p := func(h func() hash.Hash, s []byte) []byte {
		var out []byte
		a := ls
		for len(out) < n {
			a = refHMAC(h, s, a)
			out = append(out, refHMAC(h, s, append(append([]byte{}, a...), ls...))...)
		}
		return out[:n]
	}
	l := (len(secret) + 1) / 2
	x, y := p(md5.New, secret[:l]), p(sha1.New, secret[len(secret)-l:])
	for i := range x {
		x[i] ^= y[i]
	}
	return x
}

func fill(b []byte, start byte) {
	for i := range b {
		b[i] = start + byte(i)
	}
}

func testSources() *Sources {
	s := &Sources{}
	fill(s.PreMaster[:], 0x01)
	fill(s.ClientRandom1[:], 0x40)
	fill(s.ClientRandom2[:], 0x60)
	fill(s.ServerRandom1[:], 0x80)
	fill(s.ServerRandom2[:], 0xa0)
	fill(s.ClientSession[:], 0xc0)
	fill(s.ServerSession[:], 0xd0)
	return s
}

func TestPRFMatchesIndependentImplementation(t *testing.T) {
	for _, n := range []int{1, 16, 20, 48, 100, 256} {
		secret := make([]byte, 47) // odd length: halves overlap by one byte
		fill(secret, 7)
		if got, want := PRF(secret, "label", []byte("seed"), n), refPRF(secret, "label", []byte("seed"), n); !bytes.Equal(got, want) {
			t.Fatalf("n=%d: PRF %x, reference %x", n, got, want)
		}
	}
}

func TestKeyExpansionKnownAnswer(t *testing.T) {
	s := testSources()
	m := FromPRF(s)

	// Independent derivation, spelled out.
	master := refPRF(s.PreMaster[:], "OpenVPN master secret",
		append(append([]byte{}, s.ClientRandom1[:]...), s.ServerRandom1[:]...), 48)
	var seed []byte
	for _, p := range [][]byte{s.ClientRandom2[:], s.ServerRandom2[:], s.ClientSession[:], s.ServerSession[:]} {
		seed = append(seed, p...)
	}
	want := refPRF(master, "OpenVPN key expansion", seed, 256)
	if !bytes.Equal(m[:], want) {
		t.Fatalf("key expansion differs from reference:\n got %x\nwant %x", m[:], want)
	}
	// Pinned: the first and last 16 bytes of this vector. A change here
	// means the derivation changed and real peers will fail to decrypt.
	if got := hex.EncodeToString(m[:16]); got != pinnedHead {
		t.Fatalf("head %s, pinned %s", got, pinnedHead)
	}
	if got := hex.EncodeToString(m[240:]); got != pinnedTail {
		t.Fatalf("tail %s, pinned %s", got, pinnedTail)
	}
}

const (
	pinnedHead = "ce4965104ba5300b45734e6d7928d7d1"
	pinnedTail = "25addcfd865d63ff25b4a3948754610c"
)

func TestSplitDirections(t *testing.T) {
	var m Material
	fill(m[:], 0)
	cs, cr := m.Split(32, true)
	ss, sr := m.Split(32, false)
	if !bytes.Equal(cs.Key, m[0:32]) || !bytes.Equal(cs.ImplicitIV[:], m[64:72]) {
		t.Fatalf("client send key/iv wrong: %x %x", cs.Key, cs.ImplicitIV)
	}
	if !bytes.Equal(cr.Key, m[128:160]) || !bytes.Equal(cr.ImplicitIV[:], m[192:200]) {
		t.Fatalf("client recv key/iv wrong: %x %x", cr.Key, cr.ImplicitIV)
	}
	if !bytes.Equal(ss.Key, cr.Key) || ss.ImplicitIV != cr.ImplicitIV || !bytes.Equal(sr.Key, cs.Key) || sr.ImplicitIV != cs.ImplicitIV {
		t.Fatal("server keys are not the mirror of the client's")
	}
	if k, _ := m.Split(16, true); len(k.Key) != 16 {
		t.Fatalf("AES-128 key length %d", len(k.Key))
	}
}

func TestEKMBothSidesAgree(t *testing.T) {
	cert := selfSigned(t)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		a, b := net.Pipe()
		srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: v, MaxVersion: v})
		cli := tls.Client(b, &tls.Config{InsecureSkipVerify: true, MinVersion: v, MaxVersion: v})
		errc := make(chan error, 1)
		go func() { errc <- srv.Handshake() }()
		if err := cli.Handshake(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		cs, ss := cli.ConnectionState(), srv.ConnectionState()
		mc, err := FromEKM(cs.ExportKeyingMaterial)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := FromEKM(ss.ExportKeyingMaterial)
		if mc != ms {
			t.Fatalf("TLS %x: sides disagree", v)
		}
		other, _ := cs.ExportKeyingMaterial("EXPORTER-other", nil, 256)
		if bytes.Equal(other, mc[:]) {
			t.Fatal("label ignored")
		}
		a.Close()
		b.Close()
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ekm"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
