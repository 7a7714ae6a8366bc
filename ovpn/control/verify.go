package control

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TLSParams are the certificate settings of one side.
type TLSParams struct {
	CA, Cert, Key []byte // PEM; Cert/Key may be empty for a client using only auth-user-pass
	Server        bool   // build a server config (requests client certificates)
	RemoteCertTLS string // "server", "client" or "" (no extended-key-usage check)
	VerifyX509    string // verify-x509-name value ("" = no name check)
	VerifyX509Typ string // subject, name or name-prefix
	MinVersion    uint16 // default TLS 1.2
	Now           func() time.Time
	// CRLFile is the crl-verify file (PEM or DER CRLs; "" = no revocation
	// check). It is read by TLSConfig and read again at a handshake when
	// its size or modification time changed.
	CRLFile string
	// PeerFingerprints (peer-fingerprint) pin the peer's certificate: its
	// SHA-256 fingerprint must be one of them. Without a CA they replace
	// the chain check (self-signed certificates, OpenVPN 2.6's PKI-less
	// setup); with a CA both apply.
	PeerFingerprints []Fingerprint

	crl *crlFile // loaded from CRLFile by TLSConfig
}

// ErrVerify wraps every certificate-check failure.
var ErrVerify = errors.New("control: peer certificate rejected")

// TLSConfig builds a crypto/tls configuration that checks the peer as
// OpenVPN does: the chain against the configured CA (not the system roots),
// no host-name check, then the CRLs of crl-verify, remote-cert-tls
// (extended key usage) and verify-x509-name. A CRL file that cannot be
// read or parsed is an error here already.
func TLSConfig(p TLSParams) (*tls.Config, error) {
	var roots *x509.CertPool
	if len(p.CA) > 0 || len(p.PeerFingerprints) == 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(p.CA) {
			return nil, errors.New("control: no usable certificate in the CA")
		}
	}
	p.crl = nil
	if p.CRLFile != "" {
		crl, err := loadCRLFile(p.CRLFile)
		if err != nil {
			return nil, fmt.Errorf("control: %w", err)
		}
		p.crl = crl
	}
	cfg := &tls.Config{
		MinVersion:                  tls.VersionTLS12,
		InsecureSkipVerify:          true, // replaced by VerifyConnection below
		DynamicRecordSizingDisabled: true,
		SessionTicketsDisabled:      true,
	}
	if p.MinVersion != 0 {
		cfg.MinVersion = p.MinVersion
	}
	if len(p.Cert) > 0 {
		c, err := tls.X509KeyPair(p.Cert, p.Key)
		if err != nil {
			return nil, fmt.Errorf("control: client certificate/key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
		// Send the certificate even when the server's list of acceptable
		// CAs does not name its issuer, as OpenVPN does; crypto/tls would
		// otherwise send none and the server would only say "no
		// certificate".
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	if p.Server {
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.InsecureSkipVerify = false
	}
	if roots == nil && p.CRLFile != "" {
		return nil, errors.New("control: crl-verify needs a CA (with peer-fingerprint alone there is no chain to check)")
	}
	now := p.Now
	if now == nil {
		now = time.Now
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyPeer(cs.PeerCertificates, roots, p, now())
	}
	return cfg, nil
}

func verifyPeer(chain []*x509.Certificate, roots *x509.CertPool, p TLSParams, now time.Time) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: no certificate presented", ErrVerify)
	}
	leaf := chain[0]
	if len(p.PeerFingerprints) > 0 {
		fp := FingerprintOf(leaf)
		if !slices.Contains(p.PeerFingerprints, fp) {
			return fmt.Errorf("%w: %q: fingerprint %s is not in peer-fingerprint", ErrVerify, SubjectString(leaf.Subject), fp)
		}
		if roots == nil {
			return checkUsageAndName(leaf, p)
		}
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrVerify, SubjectString(leaf.Subject), err)
	}
	if p.crl != nil {
		if err := p.crl.check(chains[0], now); err != nil {
			return fmt.Errorf("%w: %v", ErrVerify, err)
		}
	}
	return checkUsageAndName(leaf, p)
}

// checkUsageAndName applies remote-cert-tls and verify-x509-name to the
// peer's certificate.
func checkUsageAndName(leaf *x509.Certificate, p TLSParams) error {
	switch p.RemoteCertTLS {
	case "server":
		if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
			return fmt.Errorf("%w: %q lacks the TLS Web Server Authentication usage (remote-cert-tls server)", ErrVerify, SubjectString(leaf.Subject))
		}
	case "client":
		if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			return fmt.Errorf("%w: %q lacks the TLS Web Client Authentication usage (remote-cert-tls client)", ErrVerify, SubjectString(leaf.Subject))
		}
	}
	if p.VerifyX509 != "" {
		var ok bool
		switch p.VerifyX509Typ {
		case "name":
			ok = leaf.Subject.CommonName == p.VerifyX509
		case "name-prefix":
			ok = strings.HasPrefix(leaf.Subject.CommonName, p.VerifyX509)
		default:
			ok = SubjectString(leaf.Subject) == p.VerifyX509
		}
		if !ok {
			return fmt.Errorf("%w: subject %q does not match verify-x509-name %q", ErrVerify, SubjectString(leaf.Subject), p.VerifyX509)
		}
	}
	return nil
}

var shortNames = map[string]string{
	"2.5.4.6": "C", "2.5.4.8": "ST", "2.5.4.7": "L", "2.5.4.10": "O", "2.5.4.11": "OU",
	"2.5.4.3": "CN", "1.2.840.113549.1.9.1": "emailAddress", "2.5.4.5": "serialNumber",
}

// SubjectString formats a subject the way OpenVPN 2.6 prints it for
// verify-x509-name: attributes in certificate order, "K=V" joined by ", ".
func SubjectString(n pkix.Name) string {
	var parts []string
	for _, rdn := range n.ToRDNSequence() {
		for _, atv := range rdn {
			k := shortNames[atv.Type.String()]
			if k == "" {
				k = asn1.ObjectIdentifier(atv.Type).String()
			}
			parts = append(parts, fmt.Sprintf("%s=%v", k, atv.Value))
		}
	}
	return strings.Join(parts, ", ")
}
