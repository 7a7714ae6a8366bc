package store

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory Store for unit tests of what uses one (the fleet
// reconciler): leases never expire by time, only by Expire, and Down makes
// every call fail as an unreachable store does. The end-to-end tests run a
// real etcd cluster instead.
type Mem struct {
	mu sync.Mutex // guards every field below
	// rev is the store revision; kv the keys; leases the live leases.
	rev    int64
	kv     map[string]KV
	leases map[LeaseID]bool
	nextID LeaseID
	log    []Event // every event, for watches that start in the past
	subs   map[*memSub]bool
	down   bool
}

type memSub struct {
	prefix string
	ch     chan WatchResponse
	ctx    context.Context
}

// ErrDown is what a Mem that is Down returns.
var ErrDown = context.DeadlineExceeded

// NewMem returns an empty store.
func NewMem() *Mem {
	return &Mem{kv: map[string]KV{}, leases: map[LeaseID]bool{}, subs: map[*memSub]bool{}}
}

// SetDown makes the store unreachable (every call fails, watches end) or
// reachable again.
func (m *Mem) SetDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
	if down {
		for s := range m.subs {
			m.endSub(s, ErrDown)
		}
	}
}

func (m *Mem) endSub(s *memSub, err error) {
	delete(m.subs, s)
	select {
	case s.ch <- WatchResponse{Err: err, Rev: m.rev}:
	default:
	}
	close(s.ch)
}

// Expire ends a lease as its TTL would, deleting its keys.
func (m *Mem) Expire(id LeaseID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revoke(id)
}

func (m *Mem) revoke(id LeaseID) {
	delete(m.leases, id)
	var evs []Event
	for k, v := range m.kv {
		if v.Lease == id {
			evs = append(evs, Event{Type: Delete, KV: KV{Key: k}})
		}
	}
	if len(evs) == 0 {
		return
	}
	m.rev++
	for i := range evs {
		evs[i].KV.ModRev = m.rev
		delete(m.kv, evs[i].KV.Key)
	}
	m.emit(evs)
}

func (m *Mem) emit(evs []Event) {
	m.log = append(m.log, evs...)
	for s := range m.subs {
		var mine []Event
		for _, e := range evs {
			if strings.HasPrefix(e.KV.Key, s.prefix) {
				mine = append(mine, e)
			}
		}
		if len(mine) == 0 {
			continue
		}
		select {
		case s.ch <- WatchResponse{Events: mine, Rev: m.rev}:
		default:
			m.endSub(s, ErrCompacted) // a reader that falls behind lists again
		}
	}
}

func (m *Mem) check(ctx context.Context) error {
	if m.down {
		return ErrDown
	}
	return ctx.Err()
}

// Get implements Store.
func (m *Mem) Get(ctx context.Context, key string) (KV, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return KV{}, false, err
	}
	kv, ok := m.kv[key]
	return kv, ok, nil
}

// List implements Store.
func (m *Mem) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, 0, err
	}
	var out []KV
	for k, v := range m.kv {
		if strings.HasPrefix(k, prefix) {
			out = append(out, v)
		}
	}
	return out, m.rev, nil
}

// Grant implements Store.
func (m *Mem) Grant(ctx context.Context, ttl time.Duration) (LeaseID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	m.nextID++
	m.leases[m.nextID] = true
	return m.nextID, nil
}

// KeepAlive implements Store.
func (m *Mem) KeepAlive(ctx context.Context, id LeaseID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	if !m.leases[id] {
		return ErrNoLease
	}
	return nil
}

// Revoke implements Store.
func (m *Mem) Revoke(ctx context.Context, id LeaseID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	m.revoke(id)
	return nil
}

// Put implements Store.
func (m *Mem) Put(ctx context.Context, key string, value []byte, lease LeaseID, cond Cond) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	old, ok := m.kv[key]
	switch {
	case cond == IfAbsent && ok, cond > 0 && (!ok || old.ModRev != int64(cond)):
		return ErrFailed
	}
	if lease != 0 && !m.leases[lease] {
		return ErrNoLease
	}
	m.rev++
	kv := KV{Key: key, Value: append([]byte(nil), value...), CreateRev: m.rev, ModRev: m.rev, Lease: lease}
	if ok {
		kv.CreateRev = old.CreateRev
	}
	m.kv[key] = kv
	m.emit([]Event{{Type: Put, KV: kv}})
	return nil
}

// Delete removes a key (for tests: an operator's etcdctl del).
func (m *Mem) Delete(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.kv[key]; !ok {
		return
	}
	m.rev++
	delete(m.kv, key)
	m.emit([]Event{{Type: Delete, KV: KV{Key: key, ModRev: m.rev}}})
}

// Watch implements Store.
func (m *Mem) Watch(ctx context.Context, prefix string, rev int64) <-chan WatchResponse {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &memSub{prefix: prefix, ch: make(chan WatchResponse, 1024), ctx: ctx}
	if err := m.check(ctx); err != nil {
		s.ch <- WatchResponse{Err: err}
		close(s.ch)
		return s.ch
	}
	var past []Event
	for _, e := range m.log {
		if e.KV.ModRev > rev && strings.HasPrefix(e.KV.Key, prefix) {
			past = append(past, e)
		}
	}
	if len(past) > 0 {
		s.ch <- WatchResponse{Events: past, Rev: m.rev}
	}
	m.subs[s] = true
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.subs[s] {
			delete(m.subs, s)
			close(s.ch)
		}
	}()
	return s.ch
}

// Close implements Store.
func (m *Mem) Close() error { return nil }
