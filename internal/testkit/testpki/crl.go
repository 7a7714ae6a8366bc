package testpki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// CRL returns a certificate revocation list (DER) signed by the CA that
// lists serials as revoked an hour ago, valid from thisUpdate to
// nextUpdate (a zero nextUpdate leaves the field out).
func (p *PKI) CRL(t testing.TB, thisUpdate, nextUpdate time.Time, serials ...*big.Int) []byte {
	t.Helper()
	// CRL numbers only need to grow; the clock does that.
	tmpl := &x509.RevocationList{Number: big.NewInt(time.Now().UnixNano()), ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now().Add(-time.Hour)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, p.CACert, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// CurrentCRL returns a PEM CRL valid from an hour ago for a day that
// revokes serials.
func (p *PKI) CurrentCRL(t testing.TB, serials ...*big.Int) []byte {
	t.Helper()
	der := p.CRL(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), serials...)
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

// Serial returns the serial number of a PEM certificate.
func Serial(t testing.TB, certPEM []byte) *big.Int {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("testpki: no PEM block in certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}
