package service

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventStreamInOrder(t *testing.T) {
	h := NewFakeHost()
	ts := startService(t, h, Config{}, roleRoot)
	st := ts.events()

	// The snapshot: one tunnel event per tunnel, marked initial.
	for _, name := range []string{"ovs", "wg0"} {
		e, _ := st.next()
		if e.Type != EventTunnel || !e.Initial || e.Tunnel != name || e.State != StateDown || e.Status == nil || e.Status.Name != name || e.Time.IsZero() {
			t.Fatalf("snapshot event for %s: %+v", name, e)
		}
	}

	if code, body, _ := ts.do("POST", "/v1/tunnels/wg0/up", ""); code != 200 {
		t.Fatalf("up: %d %s", code, body)
	}
	for _, want := range []State{StateStarting, StateUp} {
		e := st.nextOf(EventTunnel)
		if e.Tunnel != "wg0" || e.State != want || e.Initial || e.Reason != "requested" {
			t.Fatalf("want wg0 %s, got %+v", want, e)
		}
	}

	// The handshake, then transfer while traffic flows.
	h.Handshake("wg0", 0, time.Now(), netip.MustParseAddrPort("192.0.2.9:4000"))
	seen := map[string]bool{}
	for !seen[ChangeHandshake] || !seen[ChangeEndpoint] {
		e := st.nextOf(EventPeer)
		if e.Tunnel != "wg0" || e.Peer == nil || e.Peer.PublicKey != FakeKeyA || e.Peer.LatestHandshake == nil {
			t.Fatalf("peer event: %+v", e)
		}
		seen[e.Change] = true
	}
	var last uint64
	for i := 0; i < 3; i++ {
		h.Traffic("wg0", 0, 1000, 2000)
		e := st.nextOf(EventTransfer)
		if e.Tunnel != "wg0" || e.RxBytes == nil || *e.RxBytes <= last || len(e.Transfer) != 2 || e.Transfer[0].ID != FakeKeyA {
			t.Fatalf("transfer event: %+v", e)
		}
		last = *e.RxBytes
	}
	// No change, no transfer event: the next event is the state change.
	time.Sleep(3 * ts.s.cfg.PollInterval)
	if code, _, _ := ts.do("POST", "/v1/tunnels/wg0/down", ""); code != 200 {
		t.Fatal("down failed")
	}
	for _, want := range []State{StateStopping, StateDown} {
		e, _ := st.next()
		if e.Type != EventTunnel || e.State != want {
			t.Fatalf("want wg0 %s (and no transfer event while nothing moved), got %+v", want, e)
		}
	}

	// A failed bring-up: starting, then failed with the error.
	h.FailUp("ovs", "no route to the TUN device")
	ts.do("POST", "/v1/tunnels/ovs/up", "")
	if e := st.nextOf(EventTunnel); e.State != StateStarting {
		t.Fatalf("want starting, got %+v", e)
	}
	if e := st.nextOf(EventTunnel); e.State != StateFailed || e.Error != "no route to the TUN device" {
		t.Fatalf("want failed with its error, got %+v", e)
	}

	// Import and delete: tunnels events.
	ts.do("POST", "/v1/tunnels", `{"name":"new","kind":"wireguard","config":"[Interface]"}`)
	if e := st.nextOf(EventTunnels); e.Tunnel != "new" || e.Change != ChangeAdded || e.Status == nil {
		t.Fatalf("tunnels added: %+v", e)
	}
	ts.do("DELETE", "/v1/tunnels/new", "")
	if e := st.nextOf(EventTunnels); e.Tunnel != "new" || e.Change != ChangeRemoved {
		t.Fatalf("tunnels removed: %+v", e)
	}

	// An auth prompt published by the Host reaches the client as is.
	h.mu.Lock()
	h.publish(Event{Type: EventAuth, Tunnel: "ovs", Auth: &AuthPrompt{Kind: "challenge", Prompt: "Enter the code", Echo: true}})
	h.mu.Unlock()
	if e := st.nextOf(EventAuth); e.Auth == nil || e.Auth.Prompt != "Enter the code" {
		t.Fatalf("auth: %+v", e)
	}

	// Stopping ends the stream.
	ts.s.Shutdown(t.Context())
	if e := st.nextOf(EventStopping); e.Tunnel != "" {
		t.Fatalf("stopping: %+v", e)
	}
	if e, ok := st.next(); ok {
		t.Fatalf("the stream goes on after stopping: %+v", e)
	}
}

func TestHandshakeExpires(t *testing.T) {
	at := time.Now()
	old := &snapshot{at: at, names: []string{"wg0"}, tunnels: map[string]*Tunnel{"wg0": {Name: "wg0", Kind: KindWireGuard,
		Peers: []Peer{{PublicKey: FakeKeyA, LatestHandshake: ptr(at.Add(-170 * time.Second))}}}}}
	cur := &snapshot{at: at.Add(11 * time.Second), names: old.names, tunnels: old.tunnels}
	evs := diffSnapshots(old, cur)
	if len(evs) != 1 || evs[0].Type != EventPeer || evs[0].Change != ChangeHandshakeExpired {
		t.Fatalf("a handshake older than 180 s: %+v", evs)
	}
	if evs := diffSnapshots(old, old); len(evs) != 0 {
		t.Fatalf("no change, yet events: %+v", evs)
	}
}

func ptr[T any](v T) *T { return &v }

func TestSubscriberThatNeverReadsIsDropped(t *testing.T) {
	h := NewFakeHost()
	ts := startService(t, h, Config{QueueLen: 16, MaxConns: 400, StreamWriteTimeout: 5 * time.Second}, roleRoot)

	// 200 subscribers that read every event (counting lines: the
	// snapshot is two).
	const readers = 200
	var got [readers]atomic.Int64
	for i := range readers {
		resp, err := unixClient(ts.socket).Get("http://wirelane/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		go func() {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for n := int64(-1); sc.Scan(); n++ {
				got[i].Store(n)
			}
		}()
	}
	// One that sends its request and never reads a byte.
	c, err := net.Dial("unix", ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: wirelane\r\n\r\n")
	waitFor(t, "all subscribers registered", func() bool { n, _ := ts.s.hub.stats(); return n == readers+1 })

	// Big events fill the socket buffer of the one that does not read;
	// the readers are given each round before the next.
	reason := strings.Repeat("r", 4<<10)
	var lastRound int64
	const burst = 8 // fewer than QueueLen: a reader never falls that far behind
	for round := int64(1); ; round++ {
		done := make(chan struct{})
		go func() {
			h.mu.Lock()
			for range burst {
				h.publish(Event{Type: EventTunnel, Tunnel: "wg0", State: StateUp, Reason: reason})
			}
			h.mu.Unlock()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("publish blocked")
		}
		for i := range readers {
			waitFor(t, "reader "+fmt.Sprint(i)+" gets round "+fmt.Sprint(round), func() bool { return got[i].Load() >= round*burst })
		}
		if n, dropped := ts.s.hub.stats(); n == readers {
			lastRound = round
			if dropped != 1 {
				t.Fatalf("%d subscribers dropped; only the one that never reads should be", dropped)
			}
			break
		}
		if round > 500 {
			t.Fatal("the subscriber that never reads was never dropped")
		}
	}
	// The readers go on receiving.
	ts.do("POST", "/v1/tunnels/wg0/up", "")
	for i := range readers {
		waitFor(t, "reader after the drop", func() bool { return got[i].Load() >= lastRound*burst+2 })
	}
	// The dropped one's connection is closed by the service: what it
	// still finds is what was queued, then the end of the stream.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	for {
		if _, err := br.ReadString('\n'); err != nil {
			if err != io.EOF {
				t.Fatalf("the dropped subscriber's connection: %v, want EOF", err)
			}
			break
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestHubNeverBlocksAndDropsTheFull(t *testing.T) {
	hb := newHub(4)
	slow, _ := hb.subscribe(func() []Event { return []Event{{Type: EventTunnel, Initial: true}} })
	fast, _ := hb.subscribe(func() []Event { return nil })
	var fastGot int
	for i := range 10 {
		hb.publish(Event{Type: EventTransfer, Tunnel: fmt.Sprint(i)})
		for len(fast.ch) > 0 {
			<-fast.ch
			fastGot++
		}
	}
	if fastGot != 10 {
		t.Errorf("the reading subscriber got %d of 10", fastGot)
	}
	n, dropped := hb.stats()
	if n != 1 || dropped != 1 || !hb.wasSlow(slow) {
		t.Fatalf("subscribers %d, dropped %d", n, dropped)
	}
	// The dropped one still finds what was queued, then the end.
	var left int
	for range slow.ch {
		left++
	}
	if left != 5 { // the snapshot and the 4 events that fitted
		t.Errorf("the dropped subscriber's queue held %d events, want 5", left)
	}

	// Events published while the snapshot is read come after it.
	hb2 := newHub(8)
	s, _ := hb2.subscribe(func() []Event {
		hb2.publish(Event{Type: EventTunnel, Tunnel: "during"})
		return []Event{{Type: EventTunnel, Tunnel: "snap", Initial: true}}
	})
	if e := <-s.ch; e.Tunnel != "snap" {
		t.Fatalf("first %+v, want the snapshot", e)
	}
	if e := <-s.ch; e.Tunnel != "during" {
		t.Fatalf("second %+v, want the event published during the snapshot", e)
	}
	hb2.close()
	if _, ok := <-s.ch; ok {
		t.Fatal("queue open after close")
	}
	if _, err := hb2.subscribe(func() []Event { return nil }); err == nil {
		t.Fatal("subscribe after close succeeded")
	}
}

// TestStreamOutlivesTheRequestTimeout: the read deadline of a request does
// not end an event stream that lasts longer.
func TestStreamOutlivesTheRequestTimeout(t *testing.T) {
	h := NewFakeHost()
	ts := startService(t, h, Config{RequestTimeout: 200 * time.Millisecond, StreamWriteTimeout: 200 * time.Millisecond}, roleRoot)
	st := ts.events()
	st.nextOf(EventTunnel)
	time.Sleep(time.Second)
	h.Up(t.Context(), "wg0")
	for {
		if e := st.nextOf(EventTunnel); e.State == StateUp {
			break
		}
	}
}
