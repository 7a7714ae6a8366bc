package client

// Dial: the remotes tried in turn, and again after a pause, as OpenVPN's
// client does (connect-retry, connect-retry-max, resolv-retry,
// server-poll-timeout):
//
//	round 1..: for each remote (shuffled once with remote-random):
//	    host name -> RESOLVE: lookup -> failed: reported now, next remote
//	    -> CONNECTING (UDP) / TCP_CONNECT -> WAIT for the server's reset
//	       (server-poll-timeout) -> AUTH: TLS, key_method_2 -> GET_CONFIG:
//	       push (all within hand-window) -> session
//	    -> failed: reported now, next remote; AUTH_FAILED and HALT end Dial
//	-> every remote failed: without Options.Retry, Dial fails; else give up
//	   after connect-retry-max rounds, or when only lookups failed for
//	   resolv-retry seconds; else RECONNECTING: pause connect-retry
//	   (doubled after the fifth round, up to its maximum) -> next round

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
)

// ErrGaveUp marks a Dial that stopped retrying (connect-retry-max,
// resolv-retry); the error names which limit and the last failures.
var ErrGaveUp = errors.New("client: giving up")

// retryUnit is what connect-retry counts in; tests shorten it.
var retryUnit = time.Second

// retryBeforeBackoff is how many rounds pause connect-retry before the
// pause doubles, as in OpenVPN.
const retryBeforeBackoff = 5

// Dial connects to the configuration's remotes in turn and returns the
// first session that completes the handshake and push; with
// Options.Retry it tries again as the file's retry directives say
// (dial.go's map). Every failure is reported through Options.OnEvent as
// it happens.
func Dial(ctx context.Context, cfg *config.Config, opts Options) (*Session, error) {
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = time.Duration(cmp0(cfg.HandWindow, 60)) * time.Second
	}
	if opts.TransitionWindow == 0 {
		opts.TransitionWindow = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Lookup == nil {
		opts.Lookup = net.DefaultResolver.LookupNetIP
	}
	if opts.AuthToken == nil {
		opts.AuthToken = new(AuthToken)
	}
	if cfg.AuthUserPass && cfg.Username == "" && opts.Username == "" {
		return nil, errors.New("client: auth-user-pass needs a username (none in the configuration or options)")
	}
	// A file with the username only never sends an empty password: the
	// caller asks for it, as OpenVPN 2.6 prompts (config.Config.AsksPassword).
	if cfg.AsksPassword() && opts.Username == "" {
		return nil, fmt.Errorf("client: auth-user-pass gives the username %q without its password; ask for it (Options.Username and Password)", cfg.Username)
	}
	if cfg.KeyLocked() {
		return nil, errors.New("client: the private key is encrypted and was not unlocked (askpass FILE, or Config.Unlock)")
	}
	tlsCfg, err := control.TLSConfig(control.TLSParams{CA: cfg.CA, Cert: cfg.CertChain(), Key: cfg.Key,
		RemoteCertTLS: cfg.RemoteCertTLS, VerifyX509: cfg.VerifyX509, VerifyX509Typ: cfg.VerifyX509Typ,
		MinVersion: tlsVersion(cfg.TLSVersionMin), CRLFile: cfg.CRLVerify, PeerFingerprints: cfg.PeerFingerprints})
	if err != nil {
		return nil, err
	}
	remotes := slices.Clone(cfg.Remotes)
	if cfg.RemoteRandom {
		rand.Shuffle(len(remotes), func(i, j int) { remotes[i], remotes[j] = remotes[j], remotes[i] })
	}
	ev := newEmitter(opts.OnEvent)
	defer ev.stop()
	wait := time.Duration(cmp0(cfg.ConnectRetry, 1)) * retryUnit
	maxWait := time.Duration(cmp0(cfg.ConnectRetryMaxWait, 300)) * retryUnit
	var lookupSince time.Time // first failed lookup of a run of rounds where only lookups failed
	for round := 1; ; round++ {
		var errs []error
		onlyLookups := true
		for i := 0; i < len(remotes); i++ {
			r := remotes[i]
			hadToken := opts.AuthToken.Held()
			s, lookupErr, err := dialOne(ctx, cfg, opts, tlsCfg, r, ev, round)
			if err == nil {
				return s, nil
			}
			if hadToken && errors.Is(err, ErrAuthFailed) {
				// The token expired (or the server restarted): forget it
				// and try the same remote with the password, as OpenVPN
				// does.
				opts.AuthToken.Forget()
				ev.emit(StateReconnect, "the server refused the auth-token; authenticating with the password again", err)
				i--
				continue
			}
			opts.Logger.Warn("remote failed", "proto", string(r.Proto), "remote", r.Address(), "err", err)
			errs = append(errs, fmt.Errorf("%s %s: %w", r.Proto, r.Address(), err))
			if ctx.Err() != nil {
				return nil, errors.Join(errs...)
			}
			if errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrHalt) {
				return nil, err
			}
			if !lookupErr {
				onlyLookups = false
			}
		}
		if !opts.Retry {
			return nil, errors.Join(errs...)
		}
		if !onlyLookups {
			lookupSince = time.Time{}
		} else if lookupSince.IsZero() {
			lookupSince = time.Now()
		}
		var why string
		pause := wait
		switch {
		case cfg.ConnectRetryMax > 0 && round >= cfg.ConnectRetryMax:
			why = fmt.Sprintf("every remote failed %d times (connect-retry-max %d)", round, cfg.ConnectRetryMax)
		case onlyLookups && cfg.ResolvRetry >= 0:
			left := time.Duration(cfg.ResolvRetry)*time.Second - time.Since(lookupSince)
			if left <= 0 {
				why = fmt.Sprintf("no remote's host name resolved for %d s in %d attempts (resolv-retry %d)", cfg.ResolvRetry, round, cfg.ResolvRetry)
			}
			pause = min(pause, max(left, 0))
		}
		if why != "" {
			err := fmt.Errorf("%w: %s; last: %s", ErrGaveUp, why, joinErrs(errs))
			ev.emit(StateExiting, why, err)
			return nil, err
		}
		ev.at(config.Remote{}, netip.AddrPort{}, round)
		ev.emit(StateReconnect, fmt.Sprintf("every remote failed; trying again in %v (attempt %d)", pause.Round(time.Millisecond), round+1), nil)
		select {
		case <-ctx.Done():
			return nil, errors.Join(append(errs, ctx.Err())...)
		case <-time.After(pause):
		}
		if round >= retryBeforeBackoff {
			wait = min(wait*2, maxWait)
		}
	}
}

// joinErrs is errs on one line.
func joinErrs(errs []error) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// cmp0 is v, or def when v is 0.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// dialOne tries one remote: lookup (lookupErr reports that it failed),
// then the session. Failures are reported through ev.
func dialOne(ctx context.Context, cfg *config.Config, opts Options, tlsCfg *tls.Config, r config.Remote, ev *emitter, round int) (s *Session, lookupErr bool, err error) {
	ev.at(r, netip.AddrPort{}, round)
	server, err := resolve(ctx, opts, r, ev)
	if err != nil {
		ev.emit(StateResolve, "resolving "+r.Host+" failed", err)
		return nil, true, err
	}
	ev.at(r, server, round)
	st := StateConnecting
	if r.Proto == config.TCP {
		st = StateTCPConnect
	}
	ev.emit(st, fmt.Sprintf("connecting to %s (%s)", server, r.Proto), nil)
	s, err = dialRemote(ctx, cfg, opts, tlsCfg, r, server, ev)
	if err != nil {
		ev.emit(st, "connection failed", err)
	}
	return s, false, err
}

// lookupTimeout bounds one lookup of a remote's host name.
const lookupTimeout = 10 * time.Second

// resolve returns the address of r: its literal address, or the first
// its host name resolves to (reported as RESOLVE).
func resolve(ctx context.Context, opts Options, r config.Remote, ev *emitter) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(r.Host); err == nil {
		return netip.AddrPortFrom(a.Unmap(), r.Port), nil
	}
	network := "ip"
	if r.Family != 0 {
		network = fmt.Sprintf("ip%d", r.Family)
	}
	ev.emit(StateResolve, "resolving "+r.Host, nil)
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := opts.Lookup(ctx, network, r.Host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return netip.AddrPort{}, fmt.Errorf("%s: no such host", r.Host)
		}
		return netip.AddrPort{}, err
	}
	if len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("%s has no address", r.Host)
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), r.Port), nil
}

// pushSummary describes pushed options in one line for the GET_CONFIG
// event: addresses, routes, redirect, DNS, cipher, peer-id.
func pushSummary(r *control.PushReply) string {
	var parts []string
	if r.Local.IsValid() {
		p := "address " + r.Local.String()
		if r.Remote.IsValid() {
			p += ", gateway " + r.Remote.String()
		}
		parts = append(parts, p)
	}
	if r.Local6.IsValid() {
		p := "IPv6 " + r.Local6.String()
		if r.Remote6.IsValid() {
			p += " (remote " + r.Remote6.String() + ")"
		}
		parts = append(parts, p)
	}
	if !r.Local.IsValid() && !r.Local6.IsValid() {
		parts = append(parts, "no address")
	}
	switch n := len(r.Routes); n {
	case 0:
	case 1:
		parts = append(parts, "1 route")
	default:
		parts = append(parts, fmt.Sprintf("%d routes", n))
	}
	for _, o := range r.Options {
		if strings.HasPrefix(o, "redirect-gateway") || strings.HasPrefix(o, "redirect-private") {
			parts = append(parts, o)
		}
	}
	if len(r.DNS) > 0 {
		var a []string
		for _, d := range r.DNS {
			a = append(a, d.String())
		}
		parts = append(parts, "DNS "+strings.Join(a, " "))
	}
	parts = append(parts, "cipher "+r.Cipher)
	if r.HasPeerID {
		parts = append(parts, fmt.Sprintf("peer-id %d", r.PeerID))
	}
	return strings.Join(parts, ", ")
}
