package control

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// crlFixture is a CA with a good and a revoked client certificate.
type crlFixture struct {
	ca               *testpki.PKI
	good, revoked    *x509.Certificate
	goodPEM, goodKey []byte
	revPEM, revKey   []byte
	srvPEM, srvKey   []byte
	revokedSerial    *big.Int
	dir, path        string
	verify           func(*x509.Certificate) error
	cfg              *tls.Config
	mtimes           int // rewrites so far
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCRLFixture(t *testing.T) *crlFixture {
	t.Helper()
	f := &crlFixture{ca: testpki.New(t, "CRL Test CA"), dir: t.TempDir()}
	f.goodPEM, f.goodKey = f.ca.Valid(t, "good", x509.ExtKeyUsageClientAuth)
	f.revPEM, f.revKey = f.ca.Valid(t, "lost-laptop", x509.ExtKeyUsageClientAuth)
	f.srvPEM, f.srvKey = f.ca.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	f.good, f.revoked = parseCert(t, f.goodPEM), parseCert(t, f.revPEM)
	f.revokedSerial = f.revoked.SerialNumber
	f.path = filepath.Join(f.dir, "crl.pem")
	return f
}

// write replaces the CRL file atomically (rename), as an operator's tool
// would.
func (f *crlFixture) write(t *testing.T, b []byte) {
	t.Helper()
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
}

// rewrite overwrites the CRL file in place (same inode) and gives it a
// modification time later than any before.
func (f *crlFixture) rewrite(t *testing.T, b []byte) {
	t.Helper()
	if err := os.WriteFile(f.path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.mtimes++
	mt := time.Now().Add(time.Duration(f.mtimes) * time.Second)
	if err := os.Chtimes(f.path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// server builds the server-side TLS configuration with crl-verify.
func (f *crlFixture) server(t *testing.T) {
	t.Helper()
	p := TLSParams{CA: f.ca.CAPEM, Cert: f.srvPEM, Key: f.srvKey, Server: true, RemoteCertTLS: "client", CRLFile: f.path}
	cfg, err := TLSConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	f.verify = func(c *x509.Certificate) error {
		return cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}})
	}
}

func wantRejected(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want an error containing %q", substr)
	}
	if !errors.Is(err, ErrVerify) {
		t.Errorf("error does not wrap ErrVerify: %v", err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Errorf("error %q does not contain %q", err, substr)
	}
}

func TestCRLRevokedAndGood(t *testing.T) {
	for _, format := range []string{"pem", "der"} {
		t.Run(format, func(t *testing.T) {
			f := newCRLFixture(t)
			b := f.ca.CurrentCRL(t, f.revokedSerial, big.NewInt(9999))
			if format == "der" {
				blk, _ := pem.Decode(b)
				b = blk.Bytes
			}
			f.write(t, b)
			f.server(t)
			if err := f.verify(f.good); err != nil {
				t.Fatalf("good certificate rejected: %v", err)
			}
			wantRejected(t, f.verify(f.revoked), "CN=lost-laptop\" (serial "+serialHex(f.revokedSerial)+") is revoked")
		})
	}
}

func TestCRLFromOtherCA(t *testing.T) {
	f := newCRLFixture(t)
	// A CA with another name: the file covers no certificate of ours.
	other := testpki.New(t, "Other CA")
	f.write(t, other.CurrentCRL(t, f.revokedSerial))
	f.server(t)
	wantRejected(t, f.verify(f.good), "holds no CRL from \"CN=CRL Test CA\"")

	// A CA with the same name but another key: the signature fails.
	impostor := testpki.New(t, "CRL Test CA")
	f.write(t, impostor.CurrentCRL(t))
	wantRejected(t, f.verify(f.good), "does not verify against that CA's certificate")
	wantRejected(t, f.verify(f.revoked), "does not verify")

	// One forged CRL among good ones still fails closed.
	f.write(t, append(f.ca.CurrentCRL(t), impostor.CurrentCRL(t)...))
	wantRejected(t, f.verify(f.good), "does not verify")
}

func TestCRLUnreadableOrCorrupt(t *testing.T) {
	f := newCRLFixture(t)
	if _, err := TLSConfig(TLSParams{CA: f.ca.CAPEM, Server: true, CRLFile: f.path}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
	for _, bad := range [][]byte{
		[]byte("garbage\n"),
		[]byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"),
		f.ca.CAPEM, // PEM, but no CRL in it
		{},
	} {
		f.write(t, bad)
		if _, err := TLSConfig(TLSParams{CA: f.ca.CAPEM, Server: true, CRLFile: f.path}); err == nil {
			t.Errorf("corrupt CRL %q accepted", bad)
		}
	}
	// Corrupted while running: every handshake fails until it is fixed.
	f.write(t, f.ca.CurrentCRL(t))
	f.server(t)
	if err := f.verify(f.good); err != nil {
		t.Fatal(err)
	}
	good := f.ca.CurrentCRL(t)
	f.write(t, good[:len(good)/2])
	wantRejected(t, f.verify(f.good), "crl-verify "+f.path)
	wantRejected(t, f.verify(f.good), "crl-verify "+f.path)
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	wantRejected(t, f.verify(f.good), "no such file")
	f.write(t, good)
	if err := f.verify(f.good); err != nil {
		t.Fatalf("after repair: %v", err)
	}
}

func TestCRLReloadedWhenReplaced(t *testing.T) {
	f := newCRLFixture(t)
	f.write(t, f.ca.CurrentCRL(t))
	crl, err := loadCRLFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	p := TLSParams{crl: crl}
	roots := x509.NewCertPool()
	roots.AddCert(f.ca.CACert)
	verify := func(c *x509.Certificate) error { return verifyPeer([]*x509.Certificate{c}, roots, p, time.Now()) }
	reads := func() int { crl.mu.Lock(); defer crl.mu.Unlock(); return crl.reads }

	for range 5 {
		if err := verify(f.revoked); err != nil {
			t.Fatalf("not yet revoked: %v", err)
		}
	}
	if reads() != 1 {
		t.Fatalf("file read %d times for an unchanged file, want 1", reads())
	}
	f.write(t, f.ca.CurrentCRL(t, f.revokedSerial))
	wantRejected(t, verify(f.revoked), "is revoked")
	if err := verify(f.good); err != nil {
		t.Fatal(err)
	}
	if reads() != 2 {
		t.Fatalf("file read %d times, want 2", reads())
	}
	// Rewritten in place with a new mtime: read again (the serial left
	// the CRL).
	f.rewrite(t, f.ca.CurrentCRL(t, big.NewInt(0).Add(f.revokedSerial, big.NewInt(100))))
	if err := verify(f.revoked); err != nil {
		t.Fatalf("after the serial left the CRL: %v", err)
	}
	if reads() != 3 {
		t.Fatalf("file read %d times, want 3", reads())
	}
}

func TestCRLValidityPeriod(t *testing.T) {
	f := newCRLFixture(t)
	now := time.Now()
	der := func(this, next time.Time) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: f.ca.CRL(t, this, next)})
	}
	f.write(t, der(now.Add(-48*time.Hour), now.Add(-time.Hour)))
	f.server(t)
	wantRejected(t, f.verify(f.good), "has expired")

	f.write(t, der(now.Add(time.Hour), now.Add(48*time.Hour)))
	wantRejected(t, f.verify(f.good), "not valid before")

	// An expired CRL next to a current one of the same CA is fine.
	f.write(t, append(der(now.Add(-48*time.Hour), now.Add(-time.Hour)), der(now.Add(-time.Hour), now.Add(time.Hour))...))
	if err := f.verify(f.good); err != nil {
		t.Fatal(err)
	}
}

// TestCRLIntermediate checks a chain root -> intermediate -> leaf: the
// leaf needs its issuer's CRL; the intermediate is checked against the
// root's CRL when the file holds one.
func TestCRLIntermediate(t *testing.T) {
	ikey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	itmpl := &x509.Certificate{SerialNumber: big.NewInt(77), Subject: pkix.Name{CommonName: "Issuing CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	rkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rtmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Root CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	mk := func(tmpl, parent *x509.Certificate, pub any, key *ecdsa.PrivateKey) *x509.Certificate {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rcert := mk(rtmpl, rtmpl, &rkey.PublicKey, rkey)
	icert := mk(itmpl, rcert, &ikey.PublicKey, rkey)
	lkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := mk(&x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, icert, &lkey.PublicKey, ikey)
	crl := func(issuer *x509.Certificate, key *ecdsa.PrivateKey, serials ...int64) []byte {
		tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: time.Now().Add(time.Hour)}
		for _, s := range serials {
			tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: big.NewInt(s), RevocationTime: time.Now()})
		}
		der, err := x509.CreateRevocationList(rand.Reader, tmpl, issuer, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
	}
	path := filepath.Join(t.TempDir(), "crl.pem")
	roots := x509.NewCertPool()
	roots.AddCert(rcert)
	check := func(file []byte) error {
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := loadCRLFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return verifyPeer([]*x509.Certificate{leaf, icert}, roots, TLSParams{crl: c}, time.Now())
	}
	if err := check(crl(icert, ikey)); err != nil {
		t.Fatalf("issuing CA's CRL only: %v", err)
	}
	wantRejected(t, check(crl(icert, ikey, 5)), "CN=leaf\" (serial 5) is revoked")
	wantRejected(t, check(append(crl(icert, ikey), crl(rcert, rkey, 77)...)), "CN=Issuing CA\" (serial 4D) is revoked")
	if err := check(append(crl(icert, ikey), crl(rcert, rkey, 78)...)); err != nil {
		t.Fatalf("both CRLs, nothing revoked: %v", err)
	}
	wantRejected(t, check(crl(rcert, rkey)), "holds no CRL from \"CN=Issuing CA\"")
	// The intermediate's CRL signed by the root key (wrong signer).
	wantRejected(t, check(crl(&x509.Certificate{Raw: icert.Raw, RawSubject: icert.RawSubject, Subject: icert.Subject,
		SubjectKeyId: icert.SubjectKeyId, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCRLSign,
		PublicKey: &rkey.PublicKey, PublicKeyAlgorithm: x509.ECDSA}, rkey)), "does not verify")
}

// TestCRLTLSHandshake runs real handshakes: a server refuses a revoked
// client, and a client refuses a revoked server.
func TestCRLTLSHandshake(t *testing.T) {
	f := newCRLFixture(t)
	srvParsed := parseCert(t, f.srvPEM)
	f.write(t, f.ca.CurrentCRL(t, f.revokedSerial))
	handshake := func(srv, cli TLSParams) (srvErr, cliErr error) {
		sc, err := TLSConfig(srv)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := TLSConfig(cli)
		if err != nil {
			t.Fatal(err)
		}
		// TCP over loopback, not net.Pipe: its buffering lets both sides
		// send their alerts without waiting for each other.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		b, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		deadline := time.Now().Add(10 * time.Second)
		a.SetDeadline(deadline)
		b.SetDeadline(deadline)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvErr = tls.Server(a, sc).Handshake()
			a.Close()
		}()
		c := tls.Client(b, cc)
		cliErr = c.Handshake()
		wg.Wait()
		return srvErr, cliErr
	}
	srv := TLSParams{CA: f.ca.CAPEM, Cert: f.srvPEM, Key: f.srvKey, Server: true, RemoteCertTLS: "client", CRLFile: f.path}
	if se, _ := handshake(srv, TLSParams{CA: f.ca.CAPEM, Cert: f.goodPEM, Key: f.goodKey, RemoteCertTLS: "server"}); se != nil {
		t.Fatalf("good client refused: %v", se)
	}
	se, _ := handshake(srv, TLSParams{CA: f.ca.CAPEM, Cert: f.revPEM, Key: f.revKey, RemoteCertTLS: "server"})
	wantRejected(t, se, "is revoked")

	// Client mode: the server's certificate is revoked.
	f.write(t, f.ca.CurrentCRL(t, srvParsed.SerialNumber))
	_, ce := handshake(TLSParams{CA: f.ca.CAPEM, Cert: f.srvPEM, Key: f.srvKey, Server: true},
		TLSParams{CA: f.ca.CAPEM, Cert: f.goodPEM, Key: f.goodKey, RemoteCertTLS: "server", CRLFile: f.path})
	wantRejected(t, ce, "CN=server\" (serial")
}

// TestCRLConcurrentReplace verifies from several goroutines while the
// file is replaced (run with -race).
func TestCRLConcurrentReplace(t *testing.T) {
	f := newCRLFixture(t)
	f.write(t, f.ca.CurrentCRL(t))
	f.server(t)
	files := [][]byte{f.ca.CurrentCRL(t), f.ca.CurrentCRL(t, f.revokedSerial)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := f.verify(f.good); err != nil && !strings.Contains(err.Error(), "crl-verify") {
					t.Errorf("good certificate: %v", err)
					return
				}
				f.verify(f.revoked)
			}
		}()
	}
	for i := range 20 {
		f.write(t, files[i%2])
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	f.write(t, files[1])
	wantRejected(t, f.verify(f.revoked), "is revoked")
}

func TestParseCRLsCriticalExtension(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	cert, _ := x509.ParseCertificate(der)
	// A delta CRL indicator (2.5.29.27) is critical.
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(2),
		ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: []int{2, 5, 29, 27}, Critical: true, Value: []byte{2, 1, 1}}}}, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCRLs(crl); err == nil || !strings.Contains(err.Error(), "2.5.29.27") {
		t.Fatalf("delta CRL: %v", err)
	}
}

func FuzzParseCRLs(f *testing.F) {
	ca := testpki.New(f, "Fuzz CA")
	p := ca.CurrentCRL(f, big.NewInt(3), big.NewInt(1<<40))
	blk, _ := pem.Decode(p)
	f.Add(p)
	f.Add(blk.Bytes)
	f.Add(append(append([]byte{}, ca.CAPEM...), p...))
	f.Add([]byte("-----BEGIN X509 CRL-----\n\n-----END X509 CRL-----\n"))
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		lists, err := ParseCRLs(b)
		if err == nil && len(lists) == 0 {
			t.Fatal("no error and no CRL")
		}
	})
}
