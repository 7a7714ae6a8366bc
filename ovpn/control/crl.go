package control

// Certificate revocation lists (crl-verify FILE), checked during the TLS
// verification of the peer.
//
//	handshake -> verifyPeer -> chain verified against the CA
//	  -> crlFile.check(chain)
//	       -> current(): stat the file; size and mtime unchanged -> cached
//	          set (or cached error); changed -> open, read, ParseCRLs, index
//	          by issuer name
//	       -> for each certificate below the root: the CRLs of its issuer
//	          -> signature against the issuer certificate (cached per CRL)
//	          -> thisUpdate/nextUpdate -> serial listed? -> rejected
//
// Failures are closed: a file that cannot be read or parsed, a CRL whose
// signature does not verify, an expired or not yet valid CRL, or no CRL at
// all from the CA that issued the peer's certificate reject the peer.

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"sync"
	"time"
)

// ParseCRLs parses certificate revocation lists: one or more PEM "X509
// CRL" blocks (other PEM blocks are skipped), or a single DER CRL. CRLs
// with critical extensions (delta and indirect CRLs, distribution point
// scopes) are refused, since ignoring them could hide a revocation.
func ParseCRLs(b []byte) ([]*x509.RevocationList, error) {
	if !bytes.Contains(b, []byte("-----BEGIN ")) {
		rl, err := x509.ParseRevocationList(b)
		if err != nil {
			return nil, fmt.Errorf("not a PEM or DER CRL: %w", err)
		}
		if err := checkCRLExtensions(rl); err != nil {
			return nil, err
		}
		return []*x509.RevocationList{rl}, nil
	}
	var out []*x509.RevocationList
	rest := b
	for n := 1; ; n++ {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "X509 CRL" {
			continue
		}
		rl, err := x509.ParseRevocationList(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		if err := checkCRLExtensions(rl); err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		out = append(out, rl)
	}
	if len(out) == 0 {
		return nil, errors.New("no \"X509 CRL\" PEM block")
	}
	return out, nil
}

func checkCRLExtensions(rl *x509.RevocationList) error {
	for _, e := range rl.Extensions {
		if e.Critical {
			return fmt.Errorf("CRL of %q has an unsupported critical extension %v", SubjectString(rl.Issuer), e.Id)
		}
	}
	for _, r := range rl.RevokedCertificateEntries {
		for _, e := range r.Extensions {
			if e.Critical {
				return fmt.Errorf("CRL of %q: entry for serial %v has an unsupported critical extension %v", SubjectString(rl.Issuer), r.SerialNumber, e.Id)
			}
		}
	}
	return nil
}

// crlFile is the CRL file of crl-verify, shared by every handshake of a
// tls.Config.
type crlFile struct {
	path string

	mu    sync.Mutex  // guards the fields below
	stat  os.FileInfo // of the file last read (nil before the first read)
	set   *crlSet     // parsed from it (nil when err is set)
	err   error       // why it could not be used
	reads int         // times the file was read (tests)
}

// crlSet is the content of one version of the file. Immutable except for
// the signature caches in its entries.
type crlSet struct {
	byIssuer map[string][]*crlEntry // raw issuer name -> its CRLs in file order
}

// crlEntry is one CRL of the file.
type crlEntry struct {
	rl      *x509.RevocationList
	revoked map[string]time.Time // serial (decimal) -> revocation time

	mu     sync.Mutex       // guards sigErr
	sigErr map[string]error // issuer certificate (DER) -> CheckSignatureFrom result
}

// loadCRLFile reads path once, so that a missing or malformed file is
// reported when the configuration is built.
func loadCRLFile(path string) (*crlFile, error) {
	c := &crlFile{path: path}
	if _, err := c.current(); err != nil {
		return nil, err
	}
	return c, nil
}

// current returns the parsed file, reading it again only when it was
// replaced (another inode) or its size or modification time changed since
// the last read.
func (c *crlFile) current() (*crlSet, error) {
	fi, err := os.Stat(c.path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("crl-verify: %w", err)
	}
	if last := c.stat; last != nil && os.SameFile(fi, last) && fi.Size() == last.Size() && fi.ModTime().Equal(last.ModTime()) {
		return c.set, c.err
	}
	c.reads++
	c.set, c.err = nil, nil
	// Errors opening or reading are not remembered (a chmod does not
	// change the mtime): the next handshake tries again.
	c.stat = nil
	f, err := os.Open(c.path)
	if err != nil {
		return nil, fmt.Errorf("crl-verify: %w", err)
	}
	defer f.Close()
	// Remember the stat of the open file, so a replacement between the
	// two calls is noticed at the next handshake.
	if ofi, err := f.Stat(); err == nil {
		fi = ofi
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("crl-verify: %w", err)
	}
	c.stat = fi
	lists, err := ParseCRLs(b)
	if err != nil {
		c.err = fmt.Errorf("crl-verify %s: %w", c.path, err)
		return nil, c.err
	}
	set := &crlSet{byIssuer: map[string][]*crlEntry{}}
	for _, rl := range lists {
		e := &crlEntry{rl: rl, revoked: make(map[string]time.Time, len(rl.RevokedCertificateEntries)), sigErr: map[string]error{}}
		for _, r := range rl.RevokedCertificateEntries {
			e.revoked[r.SerialNumber.String()] = r.RevocationTime
		}
		set.byIssuer[string(rl.RawIssuer)] = append(set.byIssuer[string(rl.RawIssuer)], e)
	}
	c.set = set
	return set, nil
}

// check rejects a verified chain (leaf first, ending at a trusted CA) when
// one of its certificates is revoked. The leaf must be covered by a CRL
// from its issuer; intermediate CA certificates are checked when the file
// holds a CRL from their issuer.
func (c *crlFile) check(chain []*x509.Certificate, now time.Time) error {
	set, err := c.current()
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(chain); i++ {
		cert, issuer := chain[i], chain[i+1]
		entries := set.byIssuer[string(cert.RawIssuer)]
		if len(entries) == 0 {
			if i == 0 {
				return fmt.Errorf("crl-verify %s holds no CRL from %q, the issuer of %q", c.path, SubjectString(issuer.Subject), SubjectString(cert.Subject))
			}
			continue
		}
		if err := checkIssuerCRLs(entries, cert, issuer, now); err != nil {
			return fmt.Errorf("crl-verify %s: %w", c.path, err)
		}
	}
	return nil
}

// checkIssuerCRLs checks cert against the CRLs of its issuer: each must be
// signed by the issuer, at least one must be current, and none may list
// the serial.
func checkIssuerCRLs(entries []*crlEntry, cert, issuer *x509.Certificate, now time.Time) error {
	var timeErr error
	current := false
	for _, e := range entries {
		if err := e.verifiedBy(issuer); err != nil {
			return fmt.Errorf("the CRL naming %q as its issuer (number %v) does not verify against that CA's certificate: %v",
				SubjectString(issuer.Subject), e.rl.Number, err)
		}
		switch {
		case now.Before(e.rl.ThisUpdate):
			timeErr = fmt.Errorf("CRL of %q is not valid before %s (thisUpdate)", SubjectString(issuer.Subject), e.rl.ThisUpdate.UTC().Format(time.RFC3339))
		case !e.rl.NextUpdate.IsZero() && now.After(e.rl.NextUpdate):
			timeErr = fmt.Errorf("CRL of %q has expired: nextUpdate %s has passed; issue a new CRL", SubjectString(issuer.Subject), e.rl.NextUpdate.UTC().Format(time.RFC3339))
		default:
			current = true
		}
		if at, ok := e.revoked[cert.SerialNumber.String()]; ok {
			return fmt.Errorf("%q (serial %s) is revoked since %s by the CRL of %q",
				SubjectString(cert.Subject), serialHex(cert.SerialNumber), at.UTC().Format(time.RFC3339), SubjectString(issuer.Subject))
		}
	}
	if !current {
		return timeErr
	}
	return nil
}

// verifiedBy checks the CRL's signature against issuer once per issuer.
func (e *crlEntry) verifiedBy(issuer *x509.Certificate) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err, ok := e.sigErr[string(issuer.Raw)]
	if !ok {
		err = e.rl.CheckSignatureFrom(issuer)
		e.sigErr[string(issuer.Raw)] = err
	}
	return err
}

// serialHex formats a serial number as OpenSSL prints it (upper-case hex).
func serialHex(s *big.Int) string {
	return fmt.Sprintf("%X", s)
}
