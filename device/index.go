package device

import (
	"math/rand/v2"
	"sync"
)

// indexEntry is what a local index names: a peer's handshake in flight
// (kp == nil) or one of its sessions.
type indexEntry struct {
	peer *peer
	kp   *keypair
}

// indexTable maps the random 32-bit local indices that peers put in the
// receiver field of their messages to our handshakes and sessions. The
// receive path read-locks it once per batch.
type indexTable struct {
	mu sync.RWMutex          // guards m
	m  map[uint32]indexEntry // guarded by mu
}

func newIndexTable() *indexTable { return &indexTable{m: make(map[uint32]indexEntry)} }

// newIndex reserves a fresh random index for e.
func (t *indexTable) newIndex(e indexEntry) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		i := rand.Uint32()
		if _, used := t.m[i]; used || i == 0 {
			continue
		}
		t.m[i] = e
		return i
	}
}

// set replaces the entry of an index that is still owned by e.peer; it
// reports false when the index was released meanwhile.
func (t *indexTable) set(i uint32, e indexEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.m[i]; !ok || old.peer != e.peer {
		return false
	}
	t.m[i] = e
	return true
}

// lookup returns the entry of i.
func (t *indexTable) lookup(i uint32) (indexEntry, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.m[i]
	return e, ok
}

// release frees i if it still names a handshake of p.
func (t *indexTable) release(i uint32, p *peer) {
	t.mu.Lock()
	if e, ok := t.m[i]; ok && e.peer == p && e.kp == nil {
		delete(t.m, i)
	}
	t.mu.Unlock()
}

// releaseKeypair frees the index of kp if it still names kp.
func (t *indexTable) releaseKeypair(kp *keypair) {
	if kp == nil {
		return
	}
	t.mu.Lock()
	if e, ok := t.m[kp.localIndex]; ok && e.kp == kp {
		delete(t.m, kp.localIndex)
	}
	t.mu.Unlock()
}
