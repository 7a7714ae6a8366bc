package server

import (
	"errors"
	"maps"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Reload with in-process Wirelane clients: a CRL that revokes one of two
// connected clients, a new push line and a narrower data-ciphers list
// applied in place; the other client keeps its session, key and address.
func TestReloadRevokesOneClientKeepsTheOther(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	crl := filepath.Join(dir, "crl.pem")
	writeFile(t, crl, f.pki.CurrentCRL(t))
	cfg := f.serverConfig(UDP)
	cfg.CRLVerify = crl
	var left []Event
	events := make(chan Event, 16)
	s := startServer(t, cfg, Options{Events: func(e Event) { events <- e }})
	echoResponder(s)
	deskCfg := f.clientConfig(t, s, "desk", "")
	lostCfg := f.clientConfig(t, s, "lost", "")
	desk := dialClient(t, deskCfg, client.Options{})
	lost := dialClient(t, lostCfg, client.Options{})
	ping(t, desk, s.TunnelAddress().Addr(), 1)
	ping(t, lost, s.TunnelAddress().Addr(), 1)
	before, _ := clientByName(s, "desk")

	writeFile(t, crl, f.pki.CurrentCRL(t, testpki.Serial(t, lostCfg.Cert)))
	next := *cfg
	next.Push = append(slices.Clone(cfg.Push), "route 10.77.0.0 255.255.0.0")
	next.Routes = []netip.Prefix{netip.MustParsePrefix("10.66.0.0/16")}
	next.DataCiphers = []data.Cipher{data.ChaCha20Poly1305}
	plan, err := s.PlanReload(&next)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan.Lines(), "\n")
	for _, want := range []string{`push: added "route 10.77.0.0 255.255.0.0"`, "route: added 10.66.0.0/16", "data-ciphers:",
		`disconnect client "lost" (10.8.0.3): certificate no longer accepted:`, "is revoked"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}
	if len(plan.AddRoutes) != 1 || len(plan.RemoveRoutes) != 0 || plan.Address != plan.OldAddress {
		t.Errorf("plan routes %v %v, address %v -> %v", plan.AddRoutes, plan.RemoveRoutes, plan.OldAddress, plan.Address)
	}
	if len(s.Clients()) != 2 {
		t.Fatal("a plan changed something")
	}
	refused, err := s.ApplyReload(plan)
	if err != nil || len(refused) != 1 || refused[0].Client.CommonName != "lost" {
		t.Fatalf("ApplyReload: %v %+v", err, refused)
	}
	if _, err := s.ApplyReload(plan); !errors.Is(err, ErrStalePlan) {
		t.Errorf("a plan applied twice: %v", err)
	}
	select {
	case <-lost.Done():
		if err := lost.Err(); err == nil || !strings.Contains(err.Error(), "revoked") {
			t.Errorf("the revoked client ended with %v (want the reason)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked client is still connected")
	}
	eventually(t, 3*time.Second, "disconnect event", func() bool {
		for len(events) > 0 {
			if ev := <-events; ev.Kind == ClientDisconnected {
				left = append(left, ev)
			}
		}
		return len(left) > 0
	})
	if left[0].Client.CommonName != "lost" || !strings.Contains(left[0].Reason, "reload: certificate no longer accepted") {
		t.Errorf("disconnect event %+v", left[0])
	}
	for i := uint16(2); i < 6; i++ {
		ping(t, desk, s.TunnelAddress().Addr(), i)
	}
	after, ok := clientByName(s, "desk")
	if !ok || after.PeerID != before.PeerID || after.KeyID != before.KeyID || after.Since != before.Since || after.Address != before.Address || after.Cipher != before.Cipher {
		t.Fatalf("desk changed: %+v -> %+v", before, after)
	}
	if desk.KeyID() != before.KeyID {
		t.Errorf("desk renegotiated: key %d -> %d", before.KeyID, desk.KeyID())
	}
	// A new session gets the new push line and the new cipher.
	fresh := dialClient(t, f.clientConfig(t, s, "fresh", ""), client.Options{})
	if fresh.Cipher() != data.ChaCha20Poly1305 {
		t.Errorf("new session cipher %v", fresh.Cipher())
	}
	found := false
	for _, r := range fresh.Pushed().Routes {
		found = found || r.String() == "10.77.0.0/16"
	}
	if !found {
		t.Errorf("new session's routes %v lack 10.77.0.0/16", fresh.Pushed().Routes)
	}
	// The revoked certificate stays out.
	if _, err := s.PlanReload(&next); err != nil {
		t.Fatal(err)
	}
}

// A pool change keeps the clients whose address stays valid and
// disconnects the others; settings that need a restart are refused with
// nothing changed.
func TestReloadPoolsAndRefusals(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	ping(t, a, s.TunnelAddress().Addr(), 1)

	for _, tc := range []struct {
		change func(c *Config)
		want   string
	}{
		{func(c *Config) { c.Proto = TCP }, "changing proto needs a restart"},
		{func(c *Config) { c.MTU = 1400 }, "changing tun-mtu needs a restart"},
		{func(c *Config) { c.TLSCrypt = f.static }, "tls-crypt"},
		{func(c *Config) { c.CA = []byte("nonsense") }, "no usable certificate"},
		{func(c *Config) { c.CRLVerify = "/nonexistent/crl.pem" }, "crl-verify"},
	} {
		next := *cfg
		tc.change(&next)
		if _, err := s.PlanReload(&next); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
	before := s.Config()

	// A larger pool holding the same addresses: the client stays.
	grow := *cfg
	grow.Network = netip.MustParsePrefix("10.8.0.0/23")
	plan, err := s.PlanReload(&grow)
	if err != nil || len(plan.Refused) != 0 || plan.Address.String() != "10.8.0.1/23" {
		t.Fatalf("grow: %v %+v", err, plan)
	}
	if s.Config().Network != before.Network {
		t.Fatal("a plan changed the pool")
	}
	if _, err := s.ApplyReload(plan); err != nil {
		t.Fatal(err)
	}
	ping(t, a, s.TunnelAddress().Addr(), 2)
	// A pool elsewhere: the client is disconnected, told to reconnect.
	move := *cfg
	move.Network = netip.MustParsePrefix("10.9.0.0/24")
	plan, err = s.PlanReload(&move)
	if err != nil || len(plan.Refused) != 1 || !strings.Contains(plan.Refused[0].Reason, "not in the new pool 10.9.0.0/24") {
		t.Fatalf("move: %v %+v", err, plan)
	}
	if _, err := s.ApplyReload(plan); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client with an address outside the new pool is still connected")
	}
	b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
	if got := b.Pushed().Local.Addr(); got != netip.MustParseAddr("10.9.0.2") {
		t.Errorf("new client address %v", got)
	}
	ping(t, b, s.TunnelAddress().Addr(), 3)
}

// Every setting of a Config either changes the plan or is refused: a
// field added to Config without a place in reload.go fails here.
func TestReloadCoversEveryField(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	s := startServer(t, cfg, Options{})
	other := newFixture(t)
	mut := map[string]func(c *Config){
		"Listen":              func(c *Config) { c.Listen = netip.MustParseAddrPort("127.0.0.2:1") },
		"Proto":               func(c *Config) { c.Proto = TCP },
		"Network":             func(c *Config) { c.Network = netip.MustParsePrefix("10.9.0.0/24") },
		"Network6":            func(c *Config) { c.Network6 = netip.MustParsePrefix("fd00::/64") },
		"MTU":                 func(c *Config) { c.MTU = 1400 },
		"Push":                func(c *Config) { c.Push = nil },
		"Routes":              func(c *Config) { c.Routes = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")} },
		"HandWindow":          func(c *Config) { c.HandWindow = 30 },
		"ClientToClient":      func(c *Config) { c.ClientToClient = true },
		"DuplicateCN":         func(c *Config) { c.DuplicateCN = true },
		"MaxClients":          func(c *Config) { c.MaxClients = 3 },
		"ConnectFreq":         func(c *Config) { c.ConnectFreq, c.ConnectFreqSec = 1, 1 },
		"ConnectFreqSec":      func(c *Config) { c.ConnectFreq, c.ConnectFreqSec = 1, 9 },
		"Dev":                 func(c *Config) { c.Dev = "tun9" },
		"CA":                  func(c *Config) { c.CA = append(slices.Clone(c.CA), other.pki.CAPEM...) },
		"Cert":                func(c *Config) { c.Cert, c.Key = other.srvCert, other.srvKey },
		"Key":                 func(c *Config) { c.Cert, c.Key = other.srvCert, other.srvKey },
		"ExtraCerts":          func(c *Config) { c.ExtraCerts = other.pki.CAPEM },
		"TLSAuth":             func(c *Config) { c.TLSAuth = f.static },
		"TLSCrypt":            func(c *Config) { c.TLSCrypt = f.static },
		"KeyDirection":        func(c *Config) { c.KeyDirection = 1 },
		"Auth":                func(c *Config) { c.Auth = "SHA256" },
		"TLSVersionMin":       func(c *Config) { c.TLSVersionMin = "1.3" },
		"RemoteCertTLS":       func(c *Config) { c.RemoteCertTLS = "" },
		"CRLVerify":           func(c *Config) { c.CRLVerify = "/nonexistent" },
		"DataCiphers":         func(c *Config) { c.DataCiphers = []data.Cipher{data.AES128GCM} },
		"Ping":                func(c *Config) { c.Ping = 3 },
		"PingRestart":         func(c *Config) { c.PingRestart = 9 },
		"RenegSec":            func(c *Config) { c.RenegSec = 60 },
		"TLSCryptV2Server":    func(c *Config) { c.TLSCryptV2Server = &wrap.V2ServerKey{1} },
		"TLSCryptV2AllowFile": func(c *Config) { c.TLSCryptV2AllowFile = "/nonexistent" },
		"TLSCryptV2MaxAge":    func(c *Config) { c.TLSCryptV2MaxAge = 30 },
		"PeerFingerprints":    func(c *Config) { c.PeerFingerprints = []control.Fingerprint{{1}} },
		"DataCiphersFallback": func(c *Config) { c.DataCiphersFallback = data.AES256CBC },
		"Compress":            func(c *Config) { c.Compress = data.FramingV2 },
		"CompressDirective":   func(c *Config) { c.CompressDirective = "compress stub-v2" },
		"AllowCompression":    func(c *Config) { c.AllowCompression = "asym" },
		"CompressAlgorithm":   func(c *Config) { c.CompressAlgorithm = true },
		"MSSFix":              func(c *Config) { c.MSSFix, c.MSSFixSet = data.MSSFix{Max: 1280, Encap: true}, true },
		"MSSFixSet":           func(c *Config) { c.MSSFixSet = true }, // mssfix 0
		"ExplicitExitNotify":  func(c *Config) { c.ExplicitExitNotify = 2 },
		"User":                func(c *Config) { c.User = "nobody" },
		"Group":               func(c *Config) { c.Group = "nogroup" },
	}
	maps.Copy(mut, ccdMutations()) // ccd_test.go
	// Diagnostics of the parser, not settings (UserLine and GroupLine
	// place errors).
	// TLSCryptV2Client belongs to client files. compressStub follows
	// the compress lines (CompressDirective is compared), and StubOnly,
	// which it settles, is compared too; so are the settings compat
	// (compat-mode) changes: StubOnly, DataCiphers, DataCiphersFallback. keyLocked and pkcs12 are
	// the parser's state of an encrypted key (a locked key is refused by
	// serverTLS; Cert and Key are compared).
	skip := map[string]bool{"Common": true, "Warnings": true, "SecretFiles": true, "InlineSecrets": true, "TLSCryptV2Client": true,
		"keyLocked": true, "pkcs12": true, "compressStub": true, "compat": true, "UserLine": true, "GroupLine": true}
	var names []string
	for _, typ := range []reflect.Type{reflect.TypeOf(Config{}), reflect.TypeOf(config.Common{})} {
		for i := range typ.NumField() {
			names = append(names, typ.Field(i).Name)
		}
	}
	for _, name := range names {
		if skip[name] {
			continue
		}
		m, ok := mut[name]
		if !ok {
			t.Errorf("Config.%s: no case here; give it a place in reload.go (a plan line or a restart refusal) and here", name)
			continue
		}
		next := *cfg
		m(&next)
		p, err := s.PlanReload(&next)
		if err == nil && p.Empty() {
			t.Errorf("Config.%s changed: the plan is empty", name)
		}
	}
	if p, err := s.PlanReload(cfg); err != nil || !p.Empty() {
		t.Errorf("the same configuration: %+v, %v", p, err)
	}
}
