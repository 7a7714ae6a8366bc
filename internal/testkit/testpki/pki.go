// Package testpki issues throw-away certificates for the ovpn tests: a
// certificate authority and leaf certificates with chosen extended key
// usage and validity, all as PEM. Only tests import it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// PKI is a test certificate authority. It is not safe for concurrent use.
type PKI struct {
	CAPEM  []byte            // the CA certificate
	CACert *x509.Certificate // parsed CAPEM
	caKey  *ecdsa.PrivateKey
	serial int64
}

// New creates a CA named name, valid from an hour ago for a day.
func New(t testing.TB, name string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), CACert: cert, caKey: key, serial: 1}
}

// Issue returns a leaf certificate and its key (PEM) for cn with the given
// extended key usage, valid from notBefore to notAfter.
func (p *PKI) Issue(t testing.TB, cn string, eku x509.ExtKeyUsage, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: LeafSubject(cn),
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyAgreement, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CACert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// Valid issues a leaf certificate valid from an hour ago for a day.
func (p *PKI) Valid(t testing.TB, cn string, eku x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	return p.Issue(t, cn, eku, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// LeafSubject is the subject of issued certificates. It has several
// attributes, so tests can compare subject formatting with the one OpenVPN
// logs (and matches verify-x509-name on).
func LeafSubject(cn string) pkix.Name {
	return pkix.Name{Country: []string{"DE"}, Organization: []string{"Wirelane Test"}, CommonName: cn}
}
