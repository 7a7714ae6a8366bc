package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// Config is what an Agent runs on.
type Config struct {
	// Gateway is the parsed file with its keys loaded and a [fleet] table.
	Gateway *gateway.Gateway
	// Store is the fleet's store; the Agent does not close it. Update
	// may give the agent another one.
	Store store.Store
	// Options are those of wgtunnel.Reload (engine, logging, firewall).
	Options wgtunnel.Options
	// Apply changes the running gateway into cfg, the whole of it: the
	// device is read and compared (a full reload). nil means
	// wgtunnel.Reload with Options. Unit tests pass their own.
	Apply func(ctx context.Context, cfg *wgquick.Config) error
	// SetPeers changes only the fleet's peers, from old (what the agent
	// applied last) to now, cfg being the whole configuration wanted;
	// the device is not read. nil means wgtunnel.SetPeers with Options
	// when Apply is nil too, else Apply every time. An error wrapping
	// wgtunnel.ErrNeedsReload makes the agent call Apply instead.
	SetPeers func(ctx context.Context, cfg *wgquick.Config, old, now []wgquick.Peer) error
	// ReconcileEvery is how often a full apply runs even when nothing
	// changed in the store, to put back what was changed on the device
	// behind the agent's back (default 1 minute). A full apply also runs
	// at start and after every fresh list of the store (a resync).
	ReconcileEvery time.Duration
	// Log receives what the agent does; nil = slog.Default().
	Log *slog.Logger
	// StatusFile is where the status is written; "" = nowhere.
	StatusFile string
	// CacheFile keeps the last record set applied, so that a gateway
	// started while the store is unreachable comes up with the fleet it
	// last saw (fail static across restarts); "" = none.
	CacheFile string
	// ApplyDelay gathers changes before an apply (default 50 ms).
	ApplyDelay time.Duration
}

// Status is what an agent reports: `wirelane gateway show`, the service's
// API and its metrics read it.
type Status struct {
	Gateway string `json:"gateway"`
	Prefix  string `json:"prefix"`
	Site    string `json:"site"`
	PID     int    `json:"pid"`
	// StoreReachable is false while the store does not answer; the
	// gateway then keeps the peers it had (fail static).
	StoreReachable bool      `json:"store_reachable"`
	StoreError     string    `json:"store_error,omitempty"`
	LastContact    time.Time `json:"last_contact,omitzero"`
	// Published is true while this site's record is in the store.
	Published    bool   `json:"published"`
	PublishError string `json:"publish_error,omitempty"`
	// Revision is the store revision the record set is at.
	Revision int64 `json:"revision"`
	// Known counts the records seen (this site's own included), InSync
	// those the device holds as they ask, Conflicts those refused.
	Known     int       `json:"known"`
	InSync    int       `json:"in_sync"`
	Conflicts int       `json:"conflicts"`
	LastApply time.Time `json:"last_apply,omitzero"`
	// ApplyError is the last apply's failure ("" after a success).
	ApplyError string `json:"apply_error,omitempty"`
	// Reloaded is when the gateway's file was last reloaded into the
	// agent (NoteReload), ReloadError why that failed ("" = it did not).
	Reloaded    time.Time   `json:"reloaded,omitzero"`
	ReloadError string      `json:"reload_error,omitempty"`
	Updated     time.Time   `json:"updated"`
	Sites       []SiteState `json:"sites"`
}

// Agent keeps one gateway in step with its fleet.
type Agent struct {
	cfg    Config
	prefix string
	key    string      // this site's record key
	pub    wgquick.Key // this site's public key
	site   string      // this site's name
	log    *slog.Logger

	kick      chan struct{} // asks the apply loop to run
	resync    chan struct{} // asks the sync loop to list again
	republish chan struct{} // asks the publish loop to put the record again

	wmu sync.Mutex // serialises writeStatus

	// cmu guards the cache fields below and serialises writes of the
	// cache file (saveCache).
	cmu          sync.Mutex
	cachePending []store.KV  // the record set still to write; nil: none
	cacheSaved   time.Time   // when the file was last written
	cacheTimer   *time.Timer // set while a write waits

	// keepLease, set by Detach, makes Run end without revoking the lease.
	keepLease atomic.Bool

	// applyMu serialises applies (the apply loop's and Update's).
	applyMu sync.Mutex

	mu sync.Mutex // guards every field below
	// cur is the store in use: cfg.Store until Update gives another.
	cur store.Store
	// g is the gateway's file, self what resolve needs of it, record
	// this site's record; Update replaces them.
	g      *gateway.Gateway
	self   Self
	record []byte
	// records is the record set by key, at revision rev.
	records map[string]store.KV
	rev     int64
	st      Status
	// applied is the fingerprint of the fleet peers last applied, and
	// appliedPeers those peers: the agent's own record of what the device
	// holds, from which a change is sent as the peers that differ.
	applied      string
	appliedPeers []wgquick.Peer
	// full asks the next apply to be a full one (the device read and
	// compared): at start, after a resync or a failure, for a new file.
	full     bool
	lastFull time.Time
}

// New checks cfg and returns an Agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	g := cfg.Gateway
	if g == nil || g.Fleet == nil {
		return nil, errors.New("the gateway has no [fleet] table")
	}
	if g.PrivateKey == nil {
		return nil, errors.New("the gateway's private key is not loaded")
	}
	f := g.Fleet
	a := &Agent{cfg: cfg, g: g, prefix: f.Prefix, log: cfg.Log,
		kick: make(chan struct{}, 1), resync: make(chan struct{}, 1), republish: make(chan struct{}, 1),
		records: map[string]store.KV{}, full: true, cur: cfg.Store}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("fleet", f.Prefix, "site", f.Site)
	if a.cfg.ApplyDelay == 0 {
		a.cfg.ApplyDelay = 50 * time.Millisecond
	}
	if a.cfg.ReconcileEvery == 0 {
		a.cfg.ReconcileEvery = time.Minute
	}
	if a.cfg.Apply == nil {
		o := cfg.Options
		a.cfg.Apply = func(ctx context.Context, c *wgquick.Config) error {
			_, err := wgtunnel.Reload(ctx, c, wgtunnel.ReloadOptions{Options: o})
			return err
		}
		if a.cfg.SetPeers == nil {
			a.cfg.SetPeers = func(ctx context.Context, c *wgquick.Config, old, now []wgquick.Peer) error {
				_, err := wgtunnel.SetPeers(ctx, c, old, now, o)
				return err
			}
		}
	}
	a.self, a.record = selfOf(g)
	a.key, a.pub, a.site = f.Prefix+SitesKey+f.Site, a.self.PublicKey, f.Site
	a.st = Status{Gateway: g.Name, Prefix: f.Prefix, Site: f.Site, PID: os.Getpid()}
	return a, nil
}

// selfOf is what resolve needs of gateway g, and g's site record.
func selfOf(g *gateway.Gateway) (Self, []byte) {
	f := g.Fleet
	self := Self{Name: f.Site, PublicKey: g.PrivateKey.PublicKey(), Networks: f.Networks, Location: f.Location,
		Addresses: g.Addresses, Keepalive: f.PersistentKeepalive}
	for _, s := range g.Sites {
		self.Static = append(self.Static, StaticSite{Name: s.Name, PublicKey: s.PublicKey, Networks: s.Networks})
		if ap, err := netip.ParseAddrPort(s.Endpoint); err == nil {
			self.Protected = append(self.Protected, ap.Addr())
		}
	}
	for _, ep := range f.PublicEndpoints {
		if ap, err := netip.ParseAddrPort(ep); err == nil {
			self.Protected = append(self.Protected, ap.Addr())
		}
	}
	for _, e := range f.Endpoints {
		if u, err := url.Parse(e); err == nil {
			if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
				self.Protected = append(self.Protected, ip)
			}
		}
	}
	rec := Record{Name: f.Site, PublicKey: self.PublicKey, Endpoints: f.PublicEndpoints, Networks: f.Networks, Location: f.Location}
	return self, rec.Encode()
}

// ErrRestart is Update's answer to a file whose change the running agent
// cannot take: another prefix, site name, private key or interface. The
// caller stops this agent and starts a new one; the gateway keeps its
// peers meanwhile.
var ErrRestart = errors.New("the fleet's prefix, site or key changed: the agent must be restarted")

// ErrNewStore is Update's answer to a file that names another store
// (endpoints, TLS files) when Update was given none: the caller opens the
// new store and passes it.
var ErrNewStore = errors.New("the fleet's store changed: Update needs a client of the new store")

// NeedsRestart reports whether the agent of old cannot take now with
// Update (ErrRestart).
func NeedsRestart(old, now *gateway.Gateway) bool {
	if now.Fleet == nil || old.Fleet == nil || now.PrivateKey == nil || old.PrivateKey == nil {
		return true
	}
	a, b := old.Fleet, now.Fleet
	return a.Prefix != b.Prefix || a.Site != b.Site || *old.PrivateKey != *now.PrivateKey || old.Name != now.Name
}

// StoreChanged reports whether now names another store than old: other
// endpoints or TLS files (Update then takes a client of the new one).
func StoreChanged(old, now *gateway.Gateway) bool {
	if now.Fleet == nil || old.Fleet == nil {
		return true
	}
	a, b := old.Fleet, now.Fleet
	return !slices.Equal(a.Endpoints, b.Endpoints) || a.CAFile != b.CAFile || a.CertFile != b.CertFile || a.KeyFile != b.KeyFile
}

// Update makes the running agent take gateway g, a new reading of its
// file (keys loaded): its static sites, addresses and interface settings,
// and its fleet settings (networks, public endpoints, location, lease,
// keepalive) are applied in place by a full apply, the fleet's peers
// kept; a changed record is published again.
//
// A file that names another store (the [fleet] table's endpoints or TLS
// files) needs s, a client of that store (else ErrNewStore): the agent
// moves onto it in place. It lists the records afresh from s and watches
// s from there, and puts its record on s with the lease it holds (the
// same cluster: nothing changes for the other gateways) or, when s does
// not know that lease, on a new one. The peers stay meanwhile. Once
// Update returns, the agent no longer uses the old store: the caller
// closes it. s is ignored when the store did not change.
//
// A change Update cannot take is ErrRestart, and nothing changes. Update
// returns once the apply ran; its error, if any, is that of the apply
// (the gateway is then as it was, and the agent tries again).
func (a *Agent) Update(ctx context.Context, g *gateway.Gateway, s store.Store) error {
	a.mu.Lock()
	old := a.g
	a.mu.Unlock()
	if NeedsRestart(old, g) {
		return ErrRestart
	}
	newStore := StoreChanged(old, g)
	if newStore && s == nil {
		return ErrNewStore
	}
	self, rec := selfOf(g)
	a.mu.Lock()
	a.g, a.self, a.full = g, self, true
	changed := string(rec) != string(a.record)
	a.record = rec
	if newStore {
		a.cur = s
	}
	a.mu.Unlock()
	if newStore {
		a.log.Info("moving onto the new store", "endpoints", strings.Join(g.Fleet.Endpoints, ","))
		signal(a.resync)
		changed = true
	}
	if changed {
		signal(a.republish)
	}
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	return a.apply(ctx)
}

// Run publishes, watches and applies until ctx is done; then it revokes
// this site's lease (so the others drop it at once, not after the TTL)
// and returns. The gateway itself is left as it is.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("joining the fleet", "record", a.key)
	a.loadCache()
	a.writeStatus()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); a.publishLoop(ctx) }()
	go func() { defer wg.Done(); a.syncLoop(ctx) }()
	go func() { defer wg.Done(); a.applyLoop(ctx) }()
	wg.Wait()
	a.flushCache()
	a.mu.Lock()
	a.st.Published = false
	a.mu.Unlock()
	a.writeStatus()
	return nil
}

// Detach makes Run, once its ctx is done, return without revoking this
// site's lease: the record stays until the lease expires, so that an agent
// restarted within lease_ttl (a service restarted; the gateway stays up
// meanwhile) takes it over without the others dropping the site.
func (a *Agent) Detach() { a.keepLease.Store(true) }

// Peers returns the fleet's peers as the agent last applied them (nil
// before its first apply).
func (a *Agent) Peers() []wgquick.Peer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.appliedPeers)
}

// NoteReload records in the status that the gateway's file was reloaded,
// and how that went (`wirelane gateway reload` waits for it).
func (a *Agent) NoteReload(err error) {
	a.mu.Lock()
	a.st.Reloaded, a.st.ReloadError = time.Now(), ""
	if err != nil {
		a.st.ReloadError = err.Error()
	}
	a.mu.Unlock()
	a.writeStatus()
}

// Status returns a copy of the agent's status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.st
	st.Sites = slices.Clone(st.Sites)
	return st
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sleep waits d, or until ctx is done or wake signals; woke reports the
// last (the signal is taken).
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) (woke bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
		return true
	}
	return false
}

// reachable records whether the store answered; a change back to
// reachable asks for a resync.
func (a *Agent) reachable(ok bool, err error) {
	a.mu.Lock()
	was := a.st.StoreReachable
	a.st.StoreReachable = ok
	if ok {
		a.st.StoreError = ""
		a.st.LastContact = time.Now()
	} else if err != nil {
		a.st.StoreError = err.Error()
	}
	a.mu.Unlock()
	switch {
	case ok && !was:
		a.log.Info("the store answers")
		signal(a.resync)
	case !ok && was:
		a.log.Warn("the store does not answer; keeping the last state (fail static)", "err", err)
	}
	if ok != was {
		a.writeStatus()
	}
}

func (a *Agent) ttl() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.g.Fleet.LeaseTTL
}

// rec is this site's record as it is to be published.
func (a *Agent) rec() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.record
}

// callTimeout bounds one store call.
func (a *Agent) callTimeout() time.Duration { return max(a.ttl()/3, time.Second) }

// errSwapped: a store call failed after Update moved the agent onto
// another store; the caller tries again on the new one, without counting
// the old store unreachable.
var errSwapped = errors.New("the store was replaced during the call")

// currentStore is the store in use.
func (a *Agent) currentStore() store.Store {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

// call runs f on the store in use, bounded by callTimeout. A failure of a
// store that Update replaced meanwhile is errSwapped.
func (a *Agent) call(ctx context.Context, f func(context.Context, store.Store) error) error {
	c, cancel := context.WithTimeout(ctx, a.callTimeout())
	defer cancel()
	s := a.currentStore()
	err := f(c, s)
	if err != nil && a.currentStore() != s {
		return errSwapped
	}
	return err
}

// errTaken: this site's name is held by a record of another key.
var errTaken = errors.New("taken")

// publish puts this site's record bound to lease, unless the key holds
// another site's record.
func (a *Agent) publish(ctx context.Context, lease store.LeaseID) error {
	rec := a.rec()
	return a.call(ctx, func(ctx context.Context, s store.Store) error {
		kv, found, err := s.Get(ctx, a.key)
		if err != nil {
			return err
		}
		cond := store.IfAbsent
		if found {
			r, err := DecodeRecord(a.key, kv.Value)
			if err == nil && r.PublicKey != a.pub {
				a.setPublish(false, fmt.Sprintf("the site name %q is taken by public key %s; this site is not published until that record goes", a.site, r.PublicKey.String()))
				return errTaken
			}
			if kv.Lease == lease && string(kv.Value) == string(rec) {
				return nil
			}
			cond = store.Cond(kv.ModRev)
		}
		return s.Put(ctx, a.key, rec, lease, cond)
	})
}

func (a *Agent) setPublish(ok bool, msg string) {
	a.mu.Lock()
	changed := a.st.Published != ok || a.st.PublishError != msg
	a.st.Published, a.st.PublishError = ok, msg
	a.mu.Unlock()
	if changed {
		if msg != "" {
			a.log.Warn("not published", "reason", msg)
		}
		a.writeStatus()
	}
}

func (a *Agent) publishLoop(ctx context.Context) {
	var lease, stale store.LeaseID
	var leaseTTL time.Duration
	defer func() {
		if lease != 0 && !a.keepLease.Load() {
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := a.currentStore().Revoke(c, lease); err != nil {
				a.log.Warn("could not revoke the lease; the record goes when it expires", "err", err)
			}
		}
	}()
	backoff := func() { sleep(ctx, a.callTimeout(), nil) }
	for ctx.Err() == nil {
		if lease == 0 {
			var id store.LeaseID
			err := a.call(ctx, func(ctx context.Context, s store.Store) (err error) { id, err = s.Grant(ctx, a.ttl()); return })
			if errors.Is(err, errSwapped) {
				continue
			}
			if err != nil {
				a.reachable(false, err)
				backoff()
				continue
			}
			lease, leaseTTL = id, a.ttl()
		}
		switch err := a.publish(ctx, lease); {
		case errors.Is(err, errTaken):
			sleep(ctx, a.ttl()/3, a.republish)
			if err := a.call(ctx, func(ctx context.Context, s store.Store) error { return s.KeepAlive(ctx, lease) }); errors.Is(err, store.ErrNoLease) {
				lease = 0
			}
			continue
		case errors.Is(err, store.ErrNoLease):
			lease = 0
			continue
		case errors.Is(err, store.ErrFailed), errors.Is(err, errSwapped):
			continue // changed between get and put, or a new store: again
		case err != nil:
			a.reachable(false, err)
			backoff()
			continue
		}
		a.reachable(true, nil)
		a.setPublish(true, "")
		a.log.Info("published", "record", a.key, "lease", fmt.Sprintf("%x", lease))
		if stale != 0 {
			// The lease of the old TTL, which the record no longer holds.
			a.call(ctx, func(ctx context.Context, s store.Store) error { return s.Revoke(ctx, stale) })
			stale = 0
		}
	alive:
		for {
			woke := sleep(ctx, a.ttl()/3, a.republish)
			if ctx.Err() != nil {
				return
			}
			if woke {
				if a.ttl() != leaseTTL {
					// A new lease_ttl (Update): a new lease, the record
					// moved onto it, then the old one revoked.
					stale, lease = lease, 0
				}
				break alive // the record changed or went: put it again
			}
			err := a.call(ctx, func(ctx context.Context, s store.Store) error { return s.KeepAlive(ctx, lease) })
			switch {
			case errors.Is(err, errSwapped):
				break alive // a new store: put the record there
			case errors.Is(err, store.ErrNoLease):
				a.log.Warn("this site's lease expired; publishing again")
				a.setPublish(false, "the lease expired")
				lease = 0
				break alive
			case err != nil:
				a.reachable(false, err)
			default:
				a.reachable(true, nil)
				a.mu.Lock()
				ours := a.records[a.key]
				_, known := a.records[a.key]
				a.mu.Unlock()
				if known && ours.Lease != lease {
					break alive // replaced (a resync saw another lease): put again
				}
			}
		}
	}
}

func (a *Agent) syncLoop(ctx context.Context) {
	prefix := a.prefix + SitesKey
	for ctx.Err() == nil {
		var kvs []store.KV
		var rev int64
		var s store.Store // the store listed, then watched
		err := a.call(ctx, func(ctx context.Context, cur store.Store) (err error) {
			s = cur
			kvs, rev, err = s.List(ctx, prefix)
			return
		})
		if errors.Is(err, errSwapped) {
			continue
		}
		if err != nil {
			a.reachable(false, err)
			sleep(ctx, a.callTimeout(), a.resync)
			continue
		}
		a.reachable(true, nil)
		select { // this list is the resync
		case <-a.resync:
		default:
		}
		if a.currentStore() != s {
			continue // Update moved onto another store during the list
		}
		a.mu.Lock()
		a.records = make(map[string]store.KV, len(kvs))
		for _, kv := range kvs {
			a.records[kv.Key] = kv
		}
		a.rev = rev
		mine, ok := a.records[a.key]
		differs := !ok || string(mine.Value) != string(a.record)
		a.full = true // a fresh list: the next apply reads the device
		a.mu.Unlock()
		if differs {
			signal(a.republish)
		}
		signal(a.kick)
		wctx, cancel := context.WithCancel(ctx)
		ch := s.Watch(wctx, prefix, rev)
	watch:
		for {
			select {
			case <-ctx.Done():
				break watch
			case <-a.resync:
				break watch
			case r, ok := <-ch:
				if !ok {
					break watch
				}
				if r.Err != nil {
					if !errors.Is(r.Err, store.ErrCompacted) && ctx.Err() == nil && a.currentStore() == s {
						a.reachable(false, r.Err)
						sleep(ctx, a.callTimeout(), nil)
					}
					break watch
				}
				a.events(r)
			}
		}
		cancel()
	}
}

// events applies one watch response to the record set.
func (a *Agent) events(r store.WatchResponse) {
	a.mu.Lock()
	mine := false
	for _, e := range r.Events {
		if e.Type == store.Delete {
			delete(a.records, e.KV.Key)
		} else {
			a.records[e.KV.Key] = e.KV
		}
		if e.KV.Key == a.key && (e.Type == store.Delete || string(e.KV.Value) != string(a.record)) {
			mine = true
		}
	}
	if r.Rev > a.rev {
		a.rev = r.Rev
	}
	a.mu.Unlock()
	if mine {
		signal(a.republish)
	}
	signal(a.kick)
}

func (a *Agent) applyLoop(ctx context.Context) {
	reconcile := time.NewTicker(a.cfg.ReconcileEvery)
	defer reconcile.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-reconcile.C:
			a.mu.Lock()
			a.full = true
			a.mu.Unlock()
		}
		sleep(ctx, a.cfg.ApplyDelay, nil)
		if ctx.Err() != nil {
			return
		}
		select {
		case <-a.kick:
		default:
		}
		a.applyMu.Lock()
		err := a.apply(ctx)
		a.applyMu.Unlock()
		if err != nil && ctx.Err() == nil {
			a.log.Warn("apply failed; trying again", "err", err)
			sleep(ctx, time.Second, nil)
			signal(a.kick)
		}
	}
}

// apply resolves the record set and changes the gateway when its fleet
// peers changed: as the peers that differ from those it applied last
// (SetPeers, the device not read), or by a full apply (the whole
// configuration compared with the device) at start, after a resync or a
// failure, for a new file, and every ReconcileEvery.
func (a *Agent) apply(ctx context.Context) error {
	a.mu.Lock()
	kvs := make([]store.KV, 0, len(a.records))
	for _, kv := range a.records {
		kvs = append(kvs, kv)
	}
	rev := a.rev
	g, self := a.g, a.self
	full := a.full || time.Since(a.lastFull) >= a.cfg.ReconcileEvery
	old := a.appliedPeers
	a.mu.Unlock()
	peers, states := resolve(&self, a.prefix, kvs)
	fp := fingerprint(peers)
	a.mu.Lock()
	same := fp == a.applied
	a.mu.Unlock()
	var err error
	how := "full"
	if !same || full {
		cfg := g.Config()
		cfg.Peers = append(cfg.Peers, peers...)
		start := time.Now()
		if !full && a.cfg.SetPeers != nil {
			how = "peers"
			err = a.cfg.SetPeers(ctx, cfg, old, peers)
			if errors.Is(err, wgtunnel.ErrNeedsReload) {
				how, full = "full", true
			}
		}
		if full || a.cfg.SetPeers == nil {
			err = a.cfg.Apply(ctx, cfg)
		}
		if err == nil && !same {
			a.log.Info("applied the fleet", "peers", len(peers), "revision", rev, "how", how, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	if err == nil && !same {
		a.saveCache(kvs)
	}
	a.mu.Lock()
	if err == nil {
		a.applied, a.appliedPeers = fp, peers
		a.st.ApplyError = ""
		if full {
			a.full, a.lastFull = false, time.Now()
		}
		if !same {
			a.st.LastApply = time.Now()
		}
	} else {
		a.full = true // what the device holds is not known: read it next
		a.st.ApplyError = err.Error()
	}
	conflicts, insync := 0, 0
	for i := range states {
		switch states[i].State {
		case StateConflict, StateBad:
			conflicts++
		case StateActive, StateVia, StateSelf:
			states[i].InSync = err == nil
			if err == nil {
				insync++
			}
		}
	}
	prev := a.st.Sites
	a.st.Sites, a.st.Known, a.st.InSync, a.st.Conflicts, a.st.Revision = states, len(states), insync, conflicts, rev
	a.mu.Unlock()
	reportConflicts(a.log, prev, states)
	a.writeStatus()
	return err
}

// reportConflicts logs each refused record once, when it first is.
func reportConflicts(log *slog.Logger, old, now []SiteState) {
	was := map[string]string{}
	for _, s := range old {
		was[s.Key] = s.State + s.Reason
	}
	for _, s := range now {
		if (s.State == StateConflict || s.State == StateBad) && was[s.Key] != s.State+s.Reason {
			log.Warn("record refused", "key", s.Key, "state", s.State, "reason", s.Reason)
		}
	}
}

// fingerprint identifies a set of peers: a hash of their fields (not
// their text, which for 1,000 peers the agent would keep as 700 KB),
// written without reflection so that hashing 1,000 peers stays well
// under a millisecond.
func fingerprint(peers []wgquick.Peer) string {
	h := sha256.New()
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for i := range peers {
		p := &peers[i]
		b = append(b[:0], p.PublicKey[:]...)
		if p.PresharedKey != nil {
			b = append(b, 1)
			b = append(b, p.PresharedKey[:]...)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(p.AllowedIPs)))
		for _, a := range p.AllowedIPs {
			b, _ = a.AppendBinary(b)
		}
		str(p.Endpoint)
		if p.PersistentKeepalive != nil {
			b = binary.AppendUvarint(b, uint64(*p.PersistentKeepalive)+1)
		} else {
			b = append(b, 0)
		}
		str(p.Name)
		b = binary.AppendUvarint(b, uint64(p.Line))
		b = binary.AppendUvarint(b, uint64(p.EndpointLine))
		h.Write(b)
	}
	return string(h.Sum(nil))
}

// cached is one record in the cache file.
type cached struct {
	Key       string `json:"key"`
	Value     []byte `json:"value"`
	CreateRev int64  `json:"create_revision"`
}

// loadCache fills the record set from the cache file, before the store
// has answered; the first list replaces it.
func (a *Agent) loadCache() {
	if a.cfg.CacheFile == "" {
		return
	}
	b, err := os.ReadFile(a.cfg.CacheFile)
	if err != nil {
		return
	}
	var recs []cached
	if err := json.Unmarshal(b, &recs); err != nil {
		a.log.Warn("the fleet cache does not read; starting without it", "file", a.cfg.CacheFile, "err", err)
		return
	}
	a.mu.Lock()
	for _, r := range recs {
		if strings.HasPrefix(r.Key, a.prefix+SitesKey) {
			a.records[r.Key] = store.KV{Key: r.Key, Value: r.Value, CreateRev: r.CreateRev, ModRev: r.CreateRev}
		}
	}
	a.mu.Unlock()
	a.log.Info("the last fleet seen, from the cache, until the store answers", "records", len(recs))
	signal(a.kick)
}

// cacheEvery is the least time between two writes of the cache file: at
// 1,000 sites it is 300 KB, and a change rewrote it in full.
const cacheEvery = time.Second

// saveCache writes the record set just applied (atomically), at once when
// the file was last written cacheEvery ago or more, else when that time
// has passed (the last set then); Run writes what is left when it ends.
func (a *Agent) saveCache(kvs []store.KV) {
	if a.cfg.CacheFile == "" {
		return
	}
	a.cmu.Lock()
	defer a.cmu.Unlock()
	a.cachePending = kvs
	if wait := cacheEvery - time.Since(a.cacheSaved); wait > 0 {
		if a.cacheTimer == nil {
			a.cacheTimer = time.AfterFunc(wait, a.flushCache)
		}
		return
	}
	a.writeCacheLocked()
}

// flushCache writes the record set saveCache left pending, if any.
func (a *Agent) flushCache() {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	if a.cacheTimer != nil {
		a.cacheTimer.Stop()
		a.cacheTimer = nil
	}
	a.writeCacheLocked()
}

func (a *Agent) writeCacheLocked() {
	kvs := a.cachePending
	if kvs == nil {
		return
	}
	a.cachePending, a.cacheSaved = nil, time.Now()
	recs := make([]cached, len(kvs))
	for i, kv := range kvs {
		recs[i] = cached{Key: kv.Key, Value: kv.Value, CreateRev: kv.CreateRev}
	}
	b, _ := json.Marshal(recs)
	if err := os.MkdirAll(filepath.Dir(a.cfg.CacheFile), 0o700); err == nil {
		tmp := a.cfg.CacheFile + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, a.cfg.CacheFile)
		}
		if err == nil {
			return
		}
	}
	a.log.Warn("could not write the fleet cache", "file", a.cfg.CacheFile)
}

// CacheDir is where `wirelane gateway up` keeps each fleet gateway's
// last record set, NAME.json; WIRELANE_FLEET_CACHE_DIR overrides it.
var CacheDir = "/var/lib/wirelane/fleet"

// CachePath is the cache file of gateway interface name.
func CachePath(name string) string {
	dir := CacheDir
	if d := os.Getenv("WIRELANE_FLEET_CACHE_DIR"); d != "" {
		dir = d
	}
	return filepath.Join(dir, name+".json")
}

// StatusDir is where agents write their status, one NAME.json per
// gateway interface; WIRELANE_FLEET_DIR overrides it.
var StatusDir = "/run/wirelane/fleet"

// StatusPath is the status file of gateway interface name.
func StatusPath(name string) string {
	dir := StatusDir
	if d := os.Getenv("WIRELANE_FLEET_DIR"); d != "" {
		dir = d
	}
	return filepath.Join(dir, name+".json")
}

// writeStatus writes the status file (atomically: a new file renamed).
func (a *Agent) writeStatus() {
	if a.cfg.StatusFile == "" {
		return
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.mu.Lock()
	a.st.Updated = time.Now()
	// Not indented: with 1,000 sites indenting was a fifth of writing it,
	// and the file is rewritten at every change.
	b, err := json.Marshal(a.st)
	a.mu.Unlock()
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(a.cfg.StatusFile), 0o755); err != nil {
		a.log.Warn("status file", "err", err)
		return
	}
	tmp := a.cfg.StatusFile + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		a.log.Warn("status file", "err", err)
		return
	}
	if err := os.Rename(tmp, a.cfg.StatusFile); err != nil {
		a.log.Warn("status file", "err", err)
	}
}

// ReadStatus reads the status file of gateway interface name; found is
// false when there is none (no agent runs it, or none ever did).
func ReadStatus(name string) (st Status, found bool, err error) {
	b, err := os.ReadFile(StatusPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("%s: %w", StatusPath(name), err)
	}
	return st, true, nil
}
