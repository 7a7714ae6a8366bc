package fleet

// resolve turns the records a gateway sees into the WireGuard peers it
// should have. It is a pure function of the records (with their create
// revisions) and this gateway's own file, so every gateway, seeing the same
// store, makes the same decisions:
//
//	records, oldest first (CreateRev, then key)
//	  -> decode: a bad record is refused (StateBad)
//	  -> this site's own record is skipped (StateSelf)
//	  -> conflicts refused (StateConflict), the older record winning:
//	     this site's name or key with another key or name; a key or a name
//	     already taken (a static [[site]] or an older record); a network
//	     that overlaps this site's, a static site's, an older record's, or
//	     holds this gateway's own address
//	  -> locations: sites of one location reach the other locations
//	     through its leader (the oldest member with an endpoint); without
//	     locations every site is a peer of every other (the full mesh)

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Site states, as `wirelane gateway show` and the service print them.
const (
	StateSelf     = "self"
	StateActive   = "active"     // a peer of this gateway
	StateVia      = "via"        // reached through its location's leader
	StateConflict = "conflict"   // refused until the conflict is fixed
	StateBad      = "bad record" // refused: the record does not decode
)

// Self is what resolve needs of this gateway's own file.
type Self struct {
	Name      string
	PublicKey wgquick.Key
	Networks  []netip.Prefix
	Location  string
	// Static are the file's [[site]] tables; Addresses the interface's.
	Static    []StaticSite
	Addresses []netip.Prefix
	// Keepalive is the persistent keepalive toward fleet peers.
	Keepalive uint16
	// Protected are addresses no fleet network may hold: the etcd
	// members', this gateway's public endpoints and the static sites'.
	Protected []netip.Addr
}

// StaticSite is a [[site]] of the file, as far as conflicts go.
type StaticSite struct {
	Name      string
	PublicKey wgquick.Key
	Networks  []netip.Prefix
}

// SiteState is one record as this gateway judged it.
type SiteState struct {
	Key       string   `json:"key"`
	Name      string   `json:"name"`
	PublicKey string   `json:"public_key,omitempty"`
	Location  string   `json:"location,omitempty"`
	Endpoint  string   `json:"endpoint,omitempty"`
	Networks  []string `json:"networks,omitempty"`
	State     string   `json:"state"`
	// Reason says why a record is refused, or through whom it is reached.
	Reason    string `json:"reason,omitempty"`
	CreateRev int64  `json:"create_revision"`
	// InSync is true once the running device holds what this state asks.
	InSync bool `json:"in_sync"`
}

// SitesKey is the folder of the site records under the fleet prefix.
const SitesKey = "/sites/"

// accepted is a record resolve keeps.
type accepted struct {
	rec *Record
	kv  store.KV
	st  int // index in the states
}

// resolve computes the fleet peers and every record's state. It costs
// O(n log n) in the records: the overlap checks go through indexes, not
// scans. Every record is decoded anew: keeping them decoded between
// applies would spare 5 ms a change at 1,000 sites, for 0.3 KB a site
// that the memory target (docs/gateway.md#scale) cannot spare.
func resolve(self *Self, prefix string, kvs []store.KV) (peers []wgquick.Peer, states []SiteState) {
	kvs = slices.Clone(kvs)
	slices.SortFunc(kvs, func(a, b store.KV) int {
		return cmp.Or(cmp.Compare(a.CreateRev, b.CreateRev), strings.Compare(a.Key, b.Key))
	})
	names := map[string]string{}     // site name -> who holds it
	keys := map[wgquick.Key]string{} // public key -> who holds it
	nets := newNetIndex()
	for _, s := range self.Static {
		names[s.Name] = "the static site " + s.Name
		keys[s.PublicKey] = "the static site " + s.Name
		for _, n := range s.Networks {
			nets.add(n, "the static site "+s.Name)
		}
	}
	for _, n := range self.Networks {
		nets.add(n, "this site")
	}
	// Addresses no record's network may hold: routed into the tunnel,
	// they would cut this gateway off from the store or a site's
	// encrypted packets would loop into the tunnel.
	var protected addrIndex
	for _, a := range self.Protected {
		protected.add(a, "this gateway's endpoint or store")
	}
	var acc []accepted
	selfLoc := self.Location
	selfRev := int64(-1) // this site's own create revision, once seen
	for _, kv := range kvs {
		st := SiteState{Key: kv.Key, CreateRev: kv.CreateRev, Name: strings.TrimPrefix(kv.Key, prefix+SitesKey)}
		r, err := DecodeRecord(kv.Key, kv.Value)
		switch {
		case err != nil:
			st.State, st.Reason = StateBad, err.(*RecordError).Msg
		case r.Name != st.Name:
			st.State, st.Reason = StateBad, "the record names site "+clip(r.Name)+", not the one of its key"
		}
		if r != nil && st.State == "" {
			st.PublicKey, st.Location = r.PublicKey.String(), r.Location
			for _, n := range r.Networks {
				st.Networks = append(st.Networks, n.String())
			}
			if len(r.Endpoints) > 0 {
				st.Endpoint = r.Endpoints[0]
			}
			st.State, st.Reason = judge(self, r, names, keys, func(p netip.Prefix) string {
				if o, ok := nets.overlap(p); ok {
					return "network " + p.String() + " overlaps " + o.pfx.String() + " of " + o.name
				}
				for _, a := range self.Addresses {
					if p.Contains(a.Addr()) {
						return "network " + p.String() + " holds this gateway's address " + a.Addr().String()
					}
				}
				if a, ok := protected.in(p); ok {
					return "network " + p.String() + " holds " + a.what + " " + a.addr.String() + " (it would be routed into the tunnel)"
				}
				return ""
			})
			if st.State == StateActive {
				// Its endpoint must not be inside a network already taken.
				for _, ep := range r.Endpoints {
					a := netip.MustParseAddrPort(ep).Addr()
					if o, ok := nets.overlap(netip.PrefixFrom(a, a.BitLen())); ok {
						st.State, st.Reason = StateConflict, "endpoint "+ep+" is inside "+o.pfx.String()+" of "+o.name+" (it would be routed into the tunnel)"
					}
				}
			}
			switch st.State {
			case StateSelf:
				selfRev = kv.CreateRev
			case StateActive:
				for _, ep := range r.Endpoints {
					protected.add(netip.MustParseAddrPort(ep).Addr(), "the endpoint of site "+r.Name)
				}
				names[r.Name] = "site " + r.Name
				keys[r.PublicKey] = "site " + r.Name
				for _, n := range r.Networks {
					nets.add(n, "site "+r.Name)
				}
				acc = append(acc, accepted{rec: r, kv: kv, st: len(states)})
			}
		}
		states = append(states, st)
	}
	return plan(self, selfLoc, selfRev, acc, states)
}

// judge decides whether record r may join, given what is taken already.
func judge(self *Self, r *Record, names map[string]string, keys map[wgquick.Key]string, overlap func(netip.Prefix) string) (state, reason string) {
	switch {
	case r.Name == self.Name && r.PublicKey == self.PublicKey:
		return StateSelf, ""
	case r.Name == self.Name:
		return StateConflict, "the name of this site, announced with another public key"
	case r.PublicKey == self.PublicKey:
		return StateConflict, "this site's public key, announced under another name"
	}
	if who, ok := names[r.Name]; ok {
		return StateConflict, "the name is taken by " + who
	}
	if who, ok := keys[r.PublicKey]; ok {
		return StateConflict, "the public key is taken by " + who
	}
	for _, n := range r.Networks {
		if why := overlap(n); why != "" {
			return StateConflict, why
		}
	}
	return StateActive, ""
}

// plan makes the peers of the accepted records: every one directly (full
// mesh), except that sites in a location other than this one's are reached
// through that location's leader, and a member of a location that is not
// its leader reaches every other location through its own leader.
func plan(self *Self, selfLoc string, selfRev int64, acc []accepted, states []SiteState) ([]wgquick.Peer, []SiteState) {
	peer := func(a accepted, nets []netip.Prefix) wgquick.Peer {
		p := wgquick.Peer{PublicKey: a.rec.PublicKey, AllowedIPs: nets}
		if len(a.rec.Endpoints) > 0 {
			p.Endpoint = a.rec.Endpoints[0]
		}
		if self.Keepalive != 0 {
			ka := self.Keepalive
			p.PersistentKeepalive = &ka
		}
		return p
	}
	// Leaders: the oldest member of a location with an endpoint (this
	// site counts, at its own revision; not yet published: last).
	type cand struct {
		rev  int64
		self bool
		a    accepted
	}
	leader := map[string]cand{}
	consider := func(loc string, c cand) {
		if loc == "" {
			return
		}
		if l, ok := leader[loc]; !ok || c.rev < l.rev {
			leader[loc] = c
		}
	}
	for _, a := range acc {
		if len(a.rec.Endpoints) > 0 {
			consider(a.rec.Location, cand{rev: a.kv.CreateRev, a: a})
		}
	}
	if selfLoc != "" {
		r := selfRev
		if r < 0 {
			r = 1 << 62
		}
		consider(selfLoc, cand{rev: r, self: true})
	}
	var peers []wgquick.Peer
	myLeader, haveLeader := leader[selfLoc]
	amLeader := selfLoc == "" || !haveLeader || myLeader.self
	// Networks of other locations, by the peer that carries them.
	carried := map[wgquick.Key][]netip.Prefix{}
	via := map[int]string{}
	for _, a := range acc {
		loc := a.rec.Location
		switch {
		case loc == "" && selfLoc == "", loc == selfLoc:
			continue // direct, below
		case !amLeader:
			carried[myLeader.a.rec.PublicKey] = append(carried[myLeader.a.rec.PublicKey], a.rec.Networks...)
			via[a.st] = myLeader.a.rec.Name
		case loc == "":
			continue // a site without a location is its own leader
		default:
			l, ok := leader[loc]
			if !ok || l.a.rec == a.rec {
				continue // the leader itself, or no member with an endpoint
			}
			carried[l.a.rec.PublicKey] = append(carried[l.a.rec.PublicKey], a.rec.Networks...)
			via[a.st] = l.a.rec.Name
		}
	}
	for _, a := range acc {
		if _, ok := via[a.st]; ok {
			continue
		}
		nets := a.rec.Networks // the record is this resolve's own: no copy
		if c := carried[a.rec.PublicKey]; len(c) > 0 {
			nets = append(slices.Clip(nets), c...)
		}
		peers = append(peers, peer(a, nets))
	}
	for i, name := range via {
		states[i].State, states[i].Reason = StateVia, "reached through "+name
	}
	return peers, states
}
