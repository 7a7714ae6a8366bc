package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The in-memory store keeps the contract the agent relies on: conditional
// puts, leases that delete their keys, and watches that replay from a
// revision.
func TestMemKeepsTheStoreContract(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	l, _ := m.Grant(ctx, time.Second)
	if err := m.Put(ctx, "/p/a", []byte("1"), l, IfAbsent); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "/p/a", []byte("2"), l, IfAbsent); !errors.Is(err, ErrFailed) {
		t.Fatalf("second create: %v", err)
	}
	kv, _, _ := m.Get(ctx, "/p/a")
	if err := m.Put(ctx, "/p/a", []byte("3"), l, Cond(kv.ModRev+1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("put at a wrong revision: %v", err)
	}
	if err := m.Put(ctx, "/p/a", []byte("3"), l, Cond(kv.ModRev)); err != nil {
		t.Fatal(err)
	}
	_, rev, _ := m.List(ctx, "/p/")
	w := m.Watch(ctx, "/p/", 0) // from the start: both puts replayed
	r := <-w
	if len(r.Events) != 2 || string(r.Events[1].KV.Value) != "3" || r.Events[1].KV.CreateRev != kv.CreateRev {
		t.Fatalf("replay %+v", r)
	}
	m.Expire(l)
	r = <-w
	if len(r.Events) != 1 || r.Events[0].Type != Delete || r.Rev != rev+1 {
		t.Fatalf("expiry %+v", r)
	}
	if err := m.KeepAlive(ctx, l); !errors.Is(err, ErrNoLease) {
		t.Fatalf("keep-alive after expiry: %v", err)
	}
	m.SetDown(true)
	if r := <-w; r.Err == nil {
		t.Fatal("a watch survived the store going down")
	}
	if _, _, err := m.List(ctx, "/p/"); err == nil {
		t.Fatal("a down store answered")
	}
}
