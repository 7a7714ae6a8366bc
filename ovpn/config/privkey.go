package config

// Encrypted private keys and PKCS#12 files, unlocked with a passphrase
// from `askpass FILE` at parse time or, without one, by the caller
// (Common.Unlock, after asking on the terminal):
//
//	key PEM "RSA/EC PRIVATE KEY" with Proc-Type 4,ENCRYPTED -> x509.DecryptPEMBlock
//	key PEM "ENCRYPTED PRIVATE KEY" (PKCS#8 PBES2: PBKDF2 with
//	    HMAC-SHA1/224/256/384/512, AES-128/192/256-CBC) -> decryptPKCS8
//	pkcs12 FILE or <pkcs12> (base64) -> golang.org/x/crypto/pkcs12
//	    (legacy PBE: 3DES/RC2 with SHA1, as `openssl pkcs12 -export -legacy`
//	    writes) -> the certificate matching the key, the others as the CA
//	    when the file names none
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
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	pemenc "encoding/pem"
	"errors"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/pkcs12"
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
// CA certificates out of the PKCS#12 file.
func (c *Common) loadPKCS12(passphrase string) error {
	blocks, err := pkcs12.ToPEM(c.pkcs12, passphrase)
	if err != nil {
		switch {
		case errors.Is(err, pkcs12.ErrIncorrectPassword):
			return fmt.Errorf("pkcs12: %w", ErrPassphrase)
		case strings.Contains(err.Error(), "unknown") || strings.Contains(err.Error(), "not supported"):
			return fmt.Errorf("pkcs12: %v (files written by OpenSSL 3 with its AES default are not readable here: "+
				"re-export with `openssl pkcs12 -export -legacy`, or give cert and key)", err)
		}
		return fmt.Errorf("pkcs12: %v", err)
	}
	var key []byte
	var leafPub any
	for _, b := range blocks {
		if b.Type == "PRIVATE KEY" || strings.HasSuffix(b.Type, " PRIVATE KEY") {
			// x/crypto/pkcs12 labels EC keys (SEC1) "PRIVATE KEY" too:
			// find the encoding that parses.
			var k crypto.PrivateKey
			var err error
			typ := ""
			for _, t := range []string{"PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"} {
				if k, err = parsePrivateKey(t, b.Bytes); err == nil {
					typ = t
					break
				}
			}
			if typ == "" {
				return fmt.Errorf("pkcs12: private key: %v", err)
			}
			if s, ok := k.(crypto.Signer); ok {
				leafPub = s.Public()
			}
			key = pemenc.EncodeToMemory(&pemenc.Block{Type: typ, Bytes: b.Bytes})
		}
	}
	if key == nil {
		return errors.New("pkcs12: the file holds no private key")
	}
	var cert, cas []byte
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		x, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("pkcs12: certificate: %v", err)
		}
		p := pemenc.EncodeToMemory(&pemenc.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
		if pk, ok := x.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && cert == nil && pk.Equal(leafPub) {
			cert = p
		} else {
			cas = append(cas, p...)
		}
	}
	if cert == nil {
		return errors.New("pkcs12: no certificate matches the private key")
	}
	c.Cert, c.Key = cert, key
	if len(c.CA) == 0 {
		c.CA = cas
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

// checkPEM checks a ca, cert or key that holds PEM armour: every block
// decodes (armour, base64, an END line), nothing but blank lines is left
// over, certificates parse, and a key parses unless it is encrypted.
// Content without any "-----BEGIN" line is left to the TLS set-up, which
// refuses it without a location.
func checkPEM(which string, b []byte) error {
	if !bytes.Contains(b, []byte("-----BEGIN")) {
		return nil
	}
	rest := b
	n := 0
	for {
		blk, r := pemenc.Decode(rest)
		if blk == nil {
			break
		}
		rest = r
		n++
		switch which {
		case "ca", "cert":
			if blk.Type != "CERTIFICATE" {
				continue // OpenVPN's files may hold other blocks (keys, parameters) beside the certificates
			}
			if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
				return fmt.Errorf("certificate %d: %v", n, err)
			}
		case "key":
			//lint:ignore SA1019 legacy encrypted PEM keys are what old files hold
			if blk.Type == "ENCRYPTED PRIVATE KEY" || x509.IsEncryptedPEMBlock(blk) { //nolint:staticcheck
				continue
			}
			if !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
				continue
			}
			if _, err := parsePrivateKey(blk.Type, blk.Bytes); err != nil {
				return fmt.Errorf("private key: %v", err)
			}
		}
	}
	if n == 0 || bytes.Contains(rest, []byte("-----BEGIN")) {
		return errors.New("malformed PEM (a block whose armour, base64 or END line is broken)")
	}
	return nil
}
