// Package store is the small interface a fleet of gateways keeps its site
// records behind: get, list, put bound to a lease, watch. Only etcd
// implements it in the product (internal/tunnel/fleet/etcdstore); a
// Kubernetes backend (a resource per site, informers) could follow. Mem is
// an in-memory store for unit tests.
//
// The model is etcd's: one revision counter for the whole store, every key
// with the revision that created and last changed it, leases that delete
// their keys when they expire, and watches that start after a revision, so
// that a reader lists once and then follows the changes without a gap.
package store

import (
	"context"
	"errors"
	"time"
)

// KV is one key and its value as the store holds it.
type KV struct {
	Key   string
	Value []byte
	// CreateRev is the revision that created the key (it orders the
	// records: the older one wins a conflict); ModRev the one that last
	// changed it.
	CreateRev, ModRev int64
	// Lease is the lease the key is bound to, 0 for none.
	Lease LeaseID
}

// LeaseID names a lease.
type LeaseID int64

// EventType says what happened to a key.
type EventType int

// The event types.
const (
	Put EventType = iota
	Delete
)

// Event is one change to a key. A Delete's KV holds the key and the
// deleting revision (ModRev).
type Event struct {
	Type EventType
	KV   KV
}

// WatchResponse is a batch of events up to revision Rev, or the end of the
// watch (Err set, then the channel closes).
type WatchResponse struct {
	Events []Event
	Rev    int64
	Err    error
}

// Cond is the condition of a Put.
type Cond int64

// The conditions: Always, or IfAbsent; any positive Cond means "only if
// the key's ModRev is this".
const (
	Always   Cond = -1
	IfAbsent Cond = 0
)

// Errors a Store returns.
var (
	// ErrFailed: a Put's condition did not hold.
	ErrFailed = errors.New("the key changed meanwhile")
	// ErrNoLease: the lease does not exist (it expired or was revoked).
	ErrNoLease = errors.New("lease not found")
	// ErrCompacted: a watch's start revision is no longer kept; list again.
	ErrCompacted = errors.New("the revision was compacted")
)

// Store is a fleet's record store. Every method may block on the network
// until ctx is done; none keeps state a caller must release but the Store
// itself (Close).
type Store interface {
	// Get returns the key, found false when it does not exist.
	Get(ctx context.Context, key string) (kv KV, found bool, err error)
	// List returns every key under prefix and the store revision of the
	// read (a Watch from it misses nothing).
	List(ctx context.Context, prefix string) (kvs []KV, rev int64, err error)
	// Grant makes a lease of at least ttl.
	Grant(ctx context.Context, ttl time.Duration) (LeaseID, error)
	// KeepAlive renews the lease once (ErrNoLease when it is gone).
	KeepAlive(ctx context.Context, id LeaseID) error
	// Revoke ends the lease and deletes its keys.
	Revoke(ctx context.Context, id LeaseID) error
	// Put sets key to value, bound to lease (0: none), if cond holds
	// (ErrFailed when not).
	Put(ctx context.Context, key string, value []byte, lease LeaseID, cond Cond) error
	// Watch sends the changes under prefix after revision rev until ctx
	// is done or the watch fails (a last response with Err); then the
	// channel closes.
	Watch(ctx context.Context, prefix string, rev int64) <-chan WatchResponse
	// Close releases the connection.
	Close() error
}
