// Package config reads OpenVPN configuration files: one model (Common,
// what client and server files share, with each side's additions: Config
// here for clients, server.Config in ovpn/server) and one parser (Run)
// that each side extends with its directives (Extension). It reads the
// directives Wirelane implements, inline <ca>/<cert>/<key>/<tls-auth>/
// <tls-crypt>/<auth-user-pass> blocks and referenced files. Directives it
// does not implement are reported by name and line: as errors when ignoring
// them would change security (a check not made, a key not used) and when
// they belong to the other side, as warnings otherwise. ParseClientConfig
// (ccd.go) reads the server's client-config-dir files, which have
// directives of their own.
//
//	text -> Parser: lines, tokens, inline blocks -> shared directives -> Common
//	                                             -> the other side's -> FILE:LINE error
//	                                             -> Extension (clientExt: Config)
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Proto is the transport protocol.
type Proto string

// Transport protocols.
const (
	UDP Proto = "udp"
	TCP Proto = "tcp"
)

// Remote is one `remote` entry.
type Remote struct {
	Host  string
	Port  uint16
	Proto Proto
	// Family is 4, 6 or 0 (either), from udp4/tcp6-client and friends.
	Family int
	// PollTimeout is the server-poll-timeout of its <connection> block,
	// in seconds (0: the file's).
	PollTimeout int
}

// Address returns host:port.
func (r Remote) Address() string {
	return net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port)))
}

// Diagnostic is a warning about a line of the configuration.
type Diagnostic struct {
	Line      int
	Directive string
	Message   string
	// Weakens marks a directive that is honoured but weakens the tunnel
	// (a legacy cipher): callers show it in full, not in a summary of
	// ignored directives.
	Weakens bool
}

// String formats the diagnostic as "line N: directive: message" ("directive:
// message" when it is about no line).
func (d Diagnostic) String() string {
	if d.Line == 0 {
		return fmt.Sprintf("%s: %s", d.Directive, d.Message)
	}
	return fmt.Sprintf("line %d: %s: %s", d.Line, d.Directive, d.Message)
}

// Role is the side a configuration file configures.
type Role int

// Roles.
const (
	ClientRole Role = iota + 1
	ServerRole
)

// String returns "client" or "server".
func (r Role) String() string {
	if r == ServerRole {
		return "server"
	}
	return "client"
}

// Common holds what client and server configurations share. The shared
// directives fill it the same way on both sides; the side's Extension
// sets the fields whose directives differ (dev, remote-cert-tls, the
// timers).
type Common struct {
	// Dev is the dev directive (the TUN interface).
	Dev string

	// CA, Cert and Key are PEM.
	CA, Cert, Key []byte
	// ExtraCerts (extra-certs) are PEM certificates that complete the
	// local certificate's chain: sent after Cert in the TLS handshake
	// (CertChain).
	ExtraCerts []byte
	// TLSAuth and TLSCrypt are the control-channel static keys (at most
	// one).
	TLSAuth, TLSCrypt *wrap.StaticKey
	// TLSCryptV2Client (client files) and TLSCryptV2Server (server files)
	// are the tls-crypt-v2 keys: the client's own key with its wrapped
	// form, the server key that unwraps every client's.
	TLSCryptV2Client *wrap.V2ClientKey
	TLSCryptV2Server *wrap.V2ServerKey
	// PeerFingerprints are the peer-fingerprint SHA-256 fingerprints: the
	// peer's certificate must have one of them; without a CA they replace
	// the chain check (self-signed certificates).
	PeerFingerprints []control.Fingerprint
	// KeyDirection is set by key-direction or tls-auth's second argument;
	// Bidirectional when neither is given.
	KeyDirection wrap.Direction
	// Auth is the tls-auth digest ("" = SHA1).
	Auth string
	// TLSVersionMin is "1.2", "1.3" or "" (1.2).
	TLSVersionMin string
	// RemoteCertTLS is "server" (in a client file), "client" (in a server
	// file) or "": the extended key usage the peer's certificate must have.
	RemoteCertTLS string
	// CRLVerify is the crl-verify file (PEM or DER CRLs) the peer's
	// certificate is checked against at every TLS handshake; it is read
	// again when it changes ("" = no revocation check). Relative names are
	// resolved against the configuration's directory.
	CRLVerify string

	// DataCiphers is the data-ciphers preference order (with the file's
	// `cipher` appended when it is not listed, as OpenVPN 2.6 does).
	DataCiphers []data.Cipher
	// DataCiphersFallback is data-ciphers-fallback (or a CBC `cipher`):
	// the cipher used with a peer that negotiates none (a server that
	// pushes no cipher, a client that offers no list); 0 = none.
	DataCiphersFallback data.Cipher
	// Ping and PingRestart are seconds (ping, ping-restart, keepalive).
	Ping, PingRestart int
	// RenegSec is the data-key lifetime before this side renegotiates (0
	// = never).
	RenegSec int

	// Compress is the compression framing of the file's compress or
	// comp-lzo line (data.FramingNone without one); CompressDirective is
	// that line as written, and CompressAlgorithm says whether it names
	// an algorithm (lz4, lz4-v2, lzo, comp-lzo yes or adaptive) rather
	// than a stub. Nothing is ever compressed (compress.go).
	Compress          data.Framing
	CompressDirective string
	CompressAlgorithm bool
	// AllowCompression is allow-compression: "" (not given), "no",
	// "asym" or "yes" (treated as "asym": nothing is ever compressed).
	// StubOnly and Decompresses settle it with the compress line as
	// OpenVPN 2.6 does (compress.go).
	AllowCompression string
	// compressStub: the file has had a compress stub or stub-v2 line
	// (OpenVPN then announces the stubs only, and enforces no stubs-only
	// rule by default).
	compressStub bool
	// compat is compat-mode's version as major*10000 + minor*100 +
	// patch (0: none; compat.go).
	compat int

	// MSSFix is the mssfix line (MSSFixSet says whether there was one;
	// MSS gives the setting in force, the default without one). TCP SYNs
	// through the tunnel are clamped to it both ways (mssfix.go).
	MSSFix    data.MSSFix
	MSSFixSet bool

	// User and Group are the user and group directives ("" = not
	// given): once the tunnel is set up, `wirelane ovpn connect` and
	// `wirelane ovpn serve` drop to them, keeping CAP_NET_ADMIN
	// (internal/sys/privdrop). The names are looked up by the caller,
	// which reports an unknown one with UserLine or GroupLine.
	User, Group         string
	UserLine, GroupLine int

	// keyLocked: Key is an encrypted PEM key, or pkcs12 holds a PKCS#12
	// file, still waiting for its passphrase (privkey.go).
	keyLocked bool
	pkcs12    []byte

	// Warnings lists ignored directives.
	Warnings []Diagnostic
	// SecretFiles are the files read for secrets (key, tls-auth,
	// tls-crypt, tls-crypt-v2, auth-user-pass), as opened; InlineSecrets
	// says whether the configuration text itself holds one (an inline
	// <key>, <tls-auth>, <tls-crypt>, <tls-crypt-v2> or <auth-user-pass>). Callers warn when
	// such files are readable beyond their owner.
	SecretFiles   []string
	InlineSecrets bool
}

// CertChain returns the certificate followed by the extra-certs
// certificates: what the TLS handshake sends.
func (c *Common) CertChain() []byte {
	if len(c.ExtraCerts) == 0 {
		return c.Cert
	}
	out := append([]byte(nil), c.Cert...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, c.ExtraCerts...)
}

// Config is a parsed client configuration: Common and the client's
// additions.
type Config struct {
	Common

	Remotes      []Remote // in order; tried one after another
	RemoteRandom bool
	Nobind       bool
	// TunMTU is the file's tun-mtu (tunmtu.go), 0 without one.
	TunMTU int

	AuthUserPass bool
	// Username and Password are the credentials of an inline
	// <auth-user-pass> block or an auth-user-pass file, when given. A
	// block or file with the username only (or an empty password line)
	// leaves Password empty: the password is then asked for, as OpenVPN
	// 2.6 prompts for it (AsksPassword).
	Username, Password string
	// AuthNoCache is auth-nocache: the password is not kept in memory
	// once the session is up (a reconnect uses the server's auth-token,
	// or asks again).
	AuthNoCache bool

	VerifyX509    string // verify-x509-name value
	VerifyX509Typ string // subject (default), name, name-prefix

	// DHCPOptions are the file's own `dhcp-option DNS|DNS6|DOMAIN|
	// DOMAIN-SEARCH VALUE` and `dns ...` lines, validated, in the pushed
	// form ("dhcp-option DNS 10.8.0.1"); the caller applies them before
	// the pushed ones.
	DHCPOptions []string

	// BlockIPv6 is `block-ipv6`: IPv6 packets into the tunnel are answered
	// with ICMPv6 "no route" instead of being sent (the caller does it).
	BlockIPv6 bool

	// ResolvRetry is resolv-retry: how many seconds failed lookups of the
	// remotes' host names are retried before the client gives up; -1
	// (infinite, OpenVPN's default for a client) retries until stopped, 0
	// not at all.
	ResolvRetry int
	// ConnectRetry is the pause in seconds after every remote failed
	// (connect-retry, default 1); it doubles after the fifth round, up to
	// ConnectRetryMaxWait (default 300).
	ConnectRetry, ConnectRetryMaxWait int
	// ConnectRetryMax is connect-retry-max: how many times each remote is
	// tried (0, the default: no limit).
	ConnectRetryMax int
	// ServerPollTimeout is server-poll-timeout (connect-timeout): seconds
	// to wait for a remote's first reply before trying the next (default
	// 120).
	ServerPollTimeout int
	// HandWindow is hand-window: seconds the TLS handshake and key
	// exchange may take (default 60).
	HandWindow int

	// StaticChallenge is static-challenge's text, shown when asking for
	// the response ("" = none); StaticChallengeEcho says whether the
	// answer may be echoed as it is typed.
	StaticChallenge     string
	StaticChallengeEcho bool
}

// Error is a configuration error with its location.
type Error struct {
	File      string
	Line      int
	Directive string
	Err       error
}

// Error formats the error as "file:line: directive: cause"; an error
// about something the file lacks (Line 0) is "file: directive: cause".
func (e *Error) Error() string {
	where := fmt.Sprintf("%s:%d", e.File, e.Line)
	if e.Line == 0 {
		where = e.File
	}
	if e.Directive != "" {
		return fmt.Sprintf("%s: %s: %v", where, e.Directive, e.Err)
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrUnsupported marks directives that are recognised but not implemented
// and would change security if ignored.
var ErrUnsupported = errors.New("not supported")

// ErrWrongRole marks a directive of the other side: a client directive in
// a server file or a server directive in a client file.
var ErrWrongRole = errors.New("wrong side")

// ParseFile reads and parses path; relative file names in it are resolved
// against its directory.
func ParseFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path, filepath.Dir(path))
}

// Parse parses client configuration text. name labels errors; dir
// resolves relative file references ("" forbids file references).
func Parse(text []byte, name, dir string) (*Config, error) {
	e := &clientExt{cfg: &Config{Common: Common{RenegSec: 3600}, ResolvRetry: -1, ConnectRetry: 1, ConnectRetryMaxWait: 300,
		ServerPollTimeout: 120, HandWindow: 60}}
	if err := Run(text, name, dir, &e.cfg.Common, e); err != nil {
		return nil, err
	}
	return e.cfg, nil
}
