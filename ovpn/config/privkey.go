package config

// Encrypted private keys and PKCS#12 files, unlocked with a passphrase
// from `askpass FILE` at parse time or, without one, by the caller
// (Common.Unlock, after asking on the terminal):
//
//	key PEM "RSA/EC PRIVATE KEY" with Proc-Type 4,ENCRYPTED -> x509.DecryptPEMBlock
//	key PEM "ENCRYPTED PRIVATE KEY" (PKCS#8 PBES2: PBKDF2 with
//	    HMAC-SHA1/224/256/384/512, AES-128/192/256-CBC) -> decryptPKCS8
//	pkcs12 FILE or <pkcs12> (base64) -> checkPKCS12 (structure, iteration
//	    bounds) -> software.sslmate.com/src/go-pkcs12 (OpenSSL 3's default
//	    PBES2: PBKDF2-HMAC-SHA256, AES-256-CBC, MAC SHA-256; and the legacy
//	    PBE: 3DES/RC2 with SHA1, as `openssl pkcs12 -export -legacy` writes)
//	    -> the certificate matching the key, the others as the CA when the
//	    file names none
//
// A wrong passphrase is an error that says so; nothing here logs the
// passphrase or the key.

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	pemenc "encoding/pem"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strings"

	"software.sslmate.com/src/go-pkcs12"
)

// ErrPassphrase is a passphrase that does not unlock the key.
var ErrPassphrase = errors.New("wrong passphrase (or a damaged key)")

// KeyLocked reports whether the private key (an encrypted PEM key or a
// PKCS#12 file) still needs its passphrase: call Unlock before using the
// configuration.
func (c *Common) KeyLocked() bool { return c.keyLocked }

// Unlock decrypts the private key (or the PKCS#12 file) with passphrase;
// it does nothing when the key is not locked.
func (c *Common) Unlock(passphrase string) error {
	if !c.keyLocked {
		return nil
	}
	if c.pkcs12 != nil {
		if err := c.loadPKCS12(passphrase); err != nil {
			return err
		}
	} else {
		key, err := decryptKeyPEM(c.Key, passphrase)
		if err != nil {
			return err
		}
		if len(c.Cert) > 0 {
			if err := checkKeyPair(c.Cert, key); err != nil {
				return err
			}
		}
		c.Key = key
	}
	c.keyLocked = false
	return nil
}

// keyEncrypted reports whether a PEM private key is encrypted.
func keyEncrypted(b []byte) bool {
	blk, _ := pemenc.Decode(b)
	if blk == nil {
		return false
	}
	//lint:ignore SA1019 legacy encrypted PEM keys are what old files hold
	return blk.Type == "ENCRYPTED PRIVATE KEY" || x509.IsEncryptedPEMBlock(blk) //nolint:staticcheck
}

// decryptKeyPEM returns the PEM of the decrypted key.
func decryptKeyPEM(b []byte, passphrase string) ([]byte, error) {
	blk, _ := pemenc.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM private key")
	}
	if blk.Type == "ENCRYPTED PRIVATE KEY" {
		der, err := decryptPKCS8(blk.Bytes, passphrase)
		if err != nil {
			return nil, err
		}
		return pemenc.EncodeToMemory(&pemenc.Block{Type: "PRIVATE KEY", Bytes: der}), nil
	}
	//lint:ignore SA1019 legacy encrypted PEM keys are what old files hold
	der, err := x509.DecryptPEMBlock(blk, []byte(passphrase)) //nolint:staticcheck
	if err != nil {
		return nil, ErrPassphrase
	}
	// The legacy format's padding check passes by chance for about one
	// wrong passphrase in 256: parse to be sure.
	if _, err := parsePrivateKey(blk.Type, der); err != nil {
		return nil, ErrPassphrase
	}
	return pemenc.EncodeToMemory(&pemenc.Block{Type: blk.Type, Bytes: der}), nil
}

func parsePrivateKey(typ string, der []byte) (crypto.PrivateKey, error) {
	switch typ {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(der)
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(der)
	}
	return x509.ParsePKCS8PrivateKey(der)
}

// PKCS#8 and PBES2 object identifiers (RFC 8018).
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type algorithm struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm algorithm
	Data      []byte
}

type pbes2Params struct {
	KDF    algorithm
	Scheme algorithm
}

type pbkdf2Params struct {
	Salt      []byte
	Iter      int
	KeyLength int       `asn1:"optional"`
	PRF       algorithm `asn1:"optional"`
}

// maxIterations bounds PBKDF2's work for a hostile file (OpenSSL writes
// 2048, OWASP's current advice is 600 000; a million takes well under a
// second).
const maxIterations = 1_000_000

// decryptPKCS8 opens an EncryptedPrivateKeyInfo (PBES2 with PBKDF2 and
// AES-CBC, what `openssl genpkey -aes256` and `openssl pkcs8 -topk8`
// write) and returns the PKCS#8 DER of the key.
func decryptPKCS8(der []byte, passphrase string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed encrypted PKCS#8 key")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted PKCS#8 key: scheme %v is not supported (only PBES2 with PBKDF2 and AES-CBC)", info.Algorithm.Algorithm)
	}
	var p pbes2Params
	if rest, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &p); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed PBES2 parameters")
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted PKCS#8 key: key derivation %v is not supported (only PBKDF2)", p.KDF.Algorithm)
	}
	var kp pbkdf2Params
	if rest, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed PBKDF2 parameters")
	}
	if kp.Iter < 1 || kp.Iter > maxIterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d out of range (1 to %d)", kp.Iter, maxIterations)
	}
	var prf func() hash.Hash
	switch o := kp.PRF.Algorithm; {
	case len(o) == 0 || o.Equal(oidHMACSHA1):
		prf = sha1.New
	case o.Equal(oidHMACSHA224):
		prf = sha256.New224
	case o.Equal(oidHMACSHA256):
		prf = sha256.New
	case o.Equal(oidHMACSHA384):
		prf = sha512.New384
	case o.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("encrypted PKCS#8 key: PBKDF2 PRF %v is not supported", o)
	}
	var keyLen int
	switch o := p.Scheme.Algorithm; {
	case o.Equal(oidAES128CBC):
		keyLen = 16
	case o.Equal(oidAES192CBC):
		keyLen = 24
	case o.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted PKCS#8 key: cipher %v is not supported (only AES-CBC)", o)
	}
	if kp.KeyLength != 0 && kp.KeyLength != keyLen {
		return nil, errors.New("PBKDF2 key length does not match the cipher")
	}
	var iv []byte
	if rest, err := asn1.Unmarshal(p.Scheme.Parameters.FullBytes, &iv); err != nil || len(rest) != 0 || len(iv) != aes.BlockSize {
		return nil, errors.New("malformed AES-CBC parameters")
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("malformed encrypted key data")
	}
	key, err := pbkdf2.Key(prf, passphrase, kp.Salt, kp.Iter, keyLen)
	if err != nil {
		return nil, err
	}
	b, _ := aes.NewCipher(key)
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(b, iv).CryptBlocks(out, info.Data)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, ErrPassphrase
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, ErrPassphrase
	}
	return out, nil
}

// loadPKCS12 takes the certificate, key and (when the file gave no ca)
// CA certificates out of the PKCS#12 file: the certificate whose public
// key is the key's is the client's, the others are the CA.
func (c *Common) loadPKCS12(passphrase string) error {
	if err := checkPKCS12(c.pkcs12); err != nil {
		return fmt.Errorf("pkcs12: %v", err)
	}
	priv, first, more, err := pkcs12.DecodeChain(c.pkcs12, passphrase)
	if err != nil {
		if errors.Is(err, pkcs12.ErrIncorrectPassword) {
			return fmt.Errorf("pkcs12: %w", ErrPassphrase)
		}
		return fmt.Errorf("pkcs12: %v", strings.TrimPrefix(err.Error(), "pkcs12: "))
	}
	s, ok := priv.(crypto.Signer)
	if !ok {
		return fmt.Errorf("pkcs12: private key of type %T is not supported", priv)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("pkcs12: private key: %v", err)
	}
	var cert, cas []byte
	for _, x := range append([]*x509.Certificate{first}, more...) {
		p := pemenc.EncodeToMemory(&pemenc.Block{Type: "CERTIFICATE", Bytes: x.Raw})
		if pk, ok := x.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && cert == nil && pk.Equal(s.Public()) {
			cert = p
		} else {
			cas = append(cas, p...)
		}
	}
	if cert == nil {
		return errors.New("pkcs12: no certificate matches the private key")
	}
	c.Cert, c.Key = cert, pemenc.EncodeToMemory(&pemenc.Block{Type: "PRIVATE KEY", Bytes: der})
	if len(c.CA) == 0 {
		c.CA = cas
	}
	return nil
}

// The outer structure of a PKCS#12 file (RFC 7292), as far as it can be
// read without the passphrase.
type pfxPDU struct {
	Version  int
	AuthSafe pfxContentInfo
	MacData  pfxMacData `asn1:"optional"`
}

type pfxContentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"tag:0,explicit,optional"`
}

type pfxMacData struct {
	Mac struct {
		Algorithm algorithm
		Digest    []byte
	}
	Salt       []byte
	Iterations int `asn1:"optional,default:1"`
}

type pfxEncryptedData struct {
	Version int
	Info    struct {
		ContentType asn1.ObjectIdentifier
		Algorithm   algorithm
		Content     asn1.RawValue `asn1:"tag:0,optional"`
	}
}

type pbeParams struct {
	Salt       []byte
	Iterations int
}

var (
	oidPKCS7Data          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidPKCS7EncryptedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 6}
	oidShroudedKeyBag     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
)

// checkPKCS12 reads what a PKCS#12 file shows before its passphrase is
// known: the PFX version 3 structure, its password-protected content
// (data), the safes inside, and every iteration count (MAC, PBES1 or
// PBES2 of each encrypted safe) within maxIterations, so that a damaged
// or hostile file is refused at once instead of keeping the decoder busy.
// It is called at load time (so that a file still waiting for its
// passphrase is known to be PKCS#12) and before every decode.
func checkPKCS12(der []byte) error {
	var pfx pfxPDU
	if rest, err := asn1.Unmarshal(der, &pfx); err != nil || len(rest) != 0 {
		return errors.New("not a PKCS#12 file (malformed DER)")
	}
	if pfx.Version != 3 {
		return fmt.Errorf("PKCS#12 version %d is not supported (want 3)", pfx.Version)
	}
	if !pfx.AuthSafe.ContentType.Equal(oidPKCS7Data) {
		return errors.New("only password-protected PKCS#12 files are supported (public-key protected content)")
	}
	if it := pfx.MacData.Iterations; len(pfx.MacData.Mac.Algorithm.Algorithm) > 0 && (it < 1 || it > maxIterations) {
		return fmt.Errorf("MAC iteration count %d out of range (1 to %d)", it, maxIterations)
	}
	var content []byte
	if rest, err := asn1.Unmarshal(pfx.AuthSafe.Content.Bytes, &content); err != nil || len(rest) != 0 {
		return errors.New("malformed PKCS#12 content")
	}
	var safes []pfxContentInfo
	if rest, err := asn1.Unmarshal(content, &safes); err != nil || len(rest) != 0 || len(safes) == 0 {
		return errors.New("malformed PKCS#12 safes")
	}
	for _, ci := range safes {
		if ci.ContentType.Equal(oidPKCS7Data) {
			if err := checkPlainSafe(ci.Content.Bytes); err != nil {
				return err
			}
			continue
		}
		if !ci.ContentType.Equal(oidPKCS7EncryptedData) {
			return errors.New("PKCS#12 safe of an unsupported type (only data and password-encrypted data)")
		}
		var ed pfxEncryptedData
		if rest, err := asn1.Unmarshal(ci.Content.Bytes, &ed); err != nil || len(rest) != 0 {
			return errors.New("malformed PKCS#12 encrypted safe")
		}
		if err := checkPBEIterations(ed.Info.Algorithm); err != nil {
			return err
		}
	}
	return nil
}

// checkPlainSafe bounds the iteration counts of the shrouded key bags in
// an unencrypted safe (where OpenSSL puts the key). Bags inside encrypted
// safes are covered by the MAC, checked with its bounded count first.
func checkPlainSafe(raw []byte) error {
	var content []byte
	if rest, err := asn1.Unmarshal(raw, &content); err != nil || len(rest) != 0 {
		return errors.New("malformed PKCS#12 safe")
	}
	var bags []struct {
		ID    asn1.ObjectIdentifier
		Value asn1.RawValue `asn1:"tag:0,explicit"`
		Attrs asn1.RawValue `asn1:"optional"`
	}
	if rest, err := asn1.Unmarshal(content, &bags); err != nil || len(rest) != 0 {
		return errors.New("malformed PKCS#12 bags")
	}
	for _, b := range bags {
		if !b.ID.Equal(oidShroudedKeyBag) {
			continue
		}
		var info encryptedPrivateKeyInfo
		if rest, err := asn1.Unmarshal(b.Value.Bytes, &info); err != nil || len(rest) != 0 {
			return errors.New("malformed PKCS#12 key bag")
		}
		if err := checkPBEIterations(info.Algorithm); err != nil {
			return err
		}
	}
	return nil
}

// checkPBEIterations bounds the iteration count of a PBES1 (PKCS#12
// PBE) or PBES2 algorithm.
func checkPBEIterations(a algorithm) error {
	it := 0
	if a.Algorithm.Equal(oidPBES2) {
		var p pbes2Params
		if rest, err := asn1.Unmarshal(a.Parameters.FullBytes, &p); err != nil || len(rest) != 0 {
			return errors.New("malformed PBES2 parameters")
		}
		var kp pbkdf2Params
		if rest, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kp); err != nil || len(rest) != 0 {
			return errors.New("malformed PBKDF2 parameters")
		}
		it = kp.Iter
	} else {
		var p pbeParams
		if rest, err := asn1.Unmarshal(a.Parameters.FullBytes, &p); err != nil || len(rest) != 0 {
			return errors.New("malformed PBE parameters")
		}
		it = p.Iterations
	}
	if it < 1 || it > maxIterations {
		return fmt.Errorf("PBE iteration count %d out of range (1 to %d)", it, maxIterations)
	}
	return nil
}

// pkcs12Inline decodes an inline <pkcs12> block (base64, as OpenVPN
// takes it).
func pkcs12Inline(body string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
	if err != nil {
		return nil, fmt.Errorf("not base64: %v", err)
	}
	return b, nil
}

// unlock settles the private key after the walk: a PKCS#12 file (with
// the askpass passphrase, else an empty one, the common case) or an
// encrypted key (with the askpass passphrase); what stays locked waits
// for Common.Unlock.
func (p *Parser) unlock() error {
	c := p.c
	switch {
	case c.pkcs12 != nil:
		if len(c.Cert) > 0 || len(c.Key) > 0 {
			return p.Errorf("pkcs12", "pkcs12 replaces cert and key: give one or the other")
		}
		c.keyLocked = true
		err := c.Unlock(p.askpass)
		if err == nil || !p.hasAskpass && errors.Is(err, ErrPassphrase) {
			return nil // unlocked, or locked until the caller asks
		}
		if p.hasAskpass && errors.Is(err, ErrPassphrase) {
			return p.Errorf("askpass", "%v", err)
		}
		if p.pkcs12From != "" {
			return p.Errorf("pkcs12", "%s: %v", p.pkcs12From, err)
		}
		return p.Errorf("pkcs12", "%v", err)
	case keyEncrypted(c.Key):
		c.keyLocked = true
		if !p.hasAskpass {
			return nil
		}
		if err := c.Unlock(p.askpass); err != nil {
			if errors.Is(err, ErrPassphrase) {
				return p.Errorf("askpass", "the private key (line %d): %v", p.lineOf("key"), err)
			}
			return p.Errorf("key", "%v", err)
		}
	}
	return nil
}

// encodeBase64 and pemDecode serve the tests (the package's const pem in
// a test file hides the encoding/pem name there).
func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func pemDecode(b []byte) ([]byte, error) {
	blk, _ := pemenc.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	return blk.Bytes, nil
}

// checkPEM checks a ca, cert or key as OpenVPN would read it: PEM
// blocks (text around them, as easy-rsa writes before a certificate, is
// allowed), every block decoding (armour, base64, an END line: a
// truncated or garbled block is an error, not skipped), certificates
// parsing, and a ca or cert holding at least one certificate, a key
// exactly one private key that parses unless it is encrypted. Content
// that is not PEM at all, or a block of the wrong kind (a key in <cert>),
// is an error naming what was found.
func checkPEM(which string, b []byte) error {
	rest := b
	var certs, keys int
	var found []string
	for {
		blk, r := pemenc.Decode(rest)
		if blk == nil {
			break
		}
		rest = r
		found = append(found, blk.Type)
		switch {
		case blk.Type == "CERTIFICATE":
			certs++
			if which == "key" {
				continue // a key file may hold its certificate too
			}
			if len(blk.Headers) != 0 {
				return fmt.Errorf("certificate %d: PEM headers in a certificate block", certs)
			}
			if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
				return fmt.Errorf("certificate %d: %v", certs, err)
			}
		case which == "key" && strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			keys++
			//lint:ignore SA1019 legacy encrypted PEM keys are what old files hold
			if blk.Type == "ENCRYPTED PRIVATE KEY" || x509.IsEncryptedPEMBlock(blk) { //nolint:staticcheck
				continue
			}
			if _, err := parsePrivateKey(blk.Type, blk.Bytes); err != nil {
				return fmt.Errorf("private key: %v", err)
			}
		}
	}
	// pem.Decode skips a block it cannot decode and goes on with the
	// next: count the BEGIN lines to see every one was read.
	if begins := bytes.Count(b, []byte("-----BEGIN ")); begins != len(found) {
		return errors.New("malformed PEM (a block whose armour, base64 or END line is broken, or a truncated block)")
	}
	what := "a certificate (-----BEGIN CERTIFICATE-----)"
	n := certs
	if which == "key" {
		what, n = "a private key (-----BEGIN PRIVATE KEY-----, or RSA/EC PRIVATE KEY)", keys
	}
	switch {
	case len(found) == 0:
		return fmt.Errorf("not PEM: want %s", what)
	case n == 0:
		return fmt.Errorf("no %s here; the PEM holds %s", strings.TrimPrefix(what, "a "), strings.Join(found, ", "))
	case which == "key" && n > 1:
		return fmt.Errorf("%d private keys; want one", n)
	}
	return nil
}

// checkDH checks Diffie-Hellman parameters (dh FILE or <dh>): one PEM
// "DH PARAMETERS" block (PKCS#3: a prime and a generator, as `openssl
// dhparam` writes) or X9.42 "X9.42 DH PARAMETERS". Wirelane uses ECDHE
// and never these, but a file OpenVPN would refuse is refused here too.
func checkDH(b []byte) error {
	blk, _ := pemenc.Decode(b)
	if blk == nil {
		if bytes.Contains(b, []byte("-----BEGIN ")) {
			return errors.New("malformed PEM (a block whose armour, base64 or END line is broken, or a truncated block)")
		}
		return errors.New("not PEM: want Diffie-Hellman parameters (-----BEGIN DH PARAMETERS-----)")
	}
	if blk.Type != "DH PARAMETERS" && blk.Type != "X9.42 DH PARAMETERS" {
		return fmt.Errorf("want Diffie-Hellman parameters (-----BEGIN DH PARAMETERS-----), got %s", blk.Type)
	}
	var params struct {
		P, G *big.Int
		Rest asn1.RawValue `asn1:"optional"`
	}
	if _, err := asn1.Unmarshal(blk.Bytes, &params); err != nil || params.P.Sign() <= 0 || params.G.Sign() <= 0 {
		return errors.New("malformed Diffie-Hellman parameters")
	}
	return nil
}

// checkKeyPair checks that an unlocked certificate and key belong
// together, as the TLS set-up needs.
func checkKeyPair(cert, key []byte) error {
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return fmt.Errorf("the certificate and key do not make a pair: %v", strings.TrimPrefix(err.Error(), "tls: "))
	}
	return nil
}
