package device

import (
	"net/netip"
	"sync"
	"time"
)

// Handshake work accepted per source IP while under load: a token bucket of
// rateLimitBurst tokens refilled at rateLimitPerSecond.
const (
	rateLimitPerSecond = 20
	rateLimitBurst     = 5
	rateLimitCost      = time.Second / rateLimitPerSecond
	rateLimitMaxTokens = rateLimitCost * rateLimitBurst
	rateLimitForget    = time.Second // buckets idle this long are dropped
)

// rateLimiter is a per-source-IP token bucket for handshake messages.
// Tokens are measured in time: each message costs rateLimitCost and the
// bucket refills at one unit per unit of elapsed time.
type rateLimiter struct {
	mu      sync.Mutex             // guards the fields below
	buckets map[netip.Addr]*bucket // guarded by mu
	swept   time.Time              // last sweep of idle buckets
}

type bucket struct {
	tokens time.Duration
	last   time.Time
}

func newRateLimiter() *rateLimiter {
	return &rateLimiter{buckets: make(map[netip.Addr]*bucket)}
}

// allow reports whether a handshake message from ip may be processed now.
// IPv6 sources are bucketed by their /64.
func (r *rateLimiter) allow(ip netip.Addr, now time.Time) bool {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.swept) > rateLimitForget {
		for k, b := range r.buckets {
			if now.Sub(b.last) > rateLimitForget {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	b := r.buckets[ip]
	if b == nil {
		b = &bucket{tokens: rateLimitMaxTokens, last: now}
		r.buckets[ip] = b
	}
	b.tokens += now.Sub(b.last)
	b.last = now
	if b.tokens > rateLimitMaxTokens {
		b.tokens = rateLimitMaxTokens
	}
	if b.tokens < rateLimitCost {
		return false
	}
	b.tokens -= rateLimitCost
	return true
}
