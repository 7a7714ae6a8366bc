package device

import (
	"net"
	"net/netip"
	"testing"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/tun/memtun"
)

// TestReceiveTimestampsOnlyUnderLoad: the device asks the bind for receive
// timestamps when it goes under load and turns them off once load has
// lapsed for UnderLoadAfterTime; a datagram read while they are off costs
// nothing more than before. A closed and reopened bind starts with them off.
func TestReceiveTimestampsOnlyUnderLoad(t *testing.T) {
	clk := newFakeClock()
	d := newDevice(memtun.New("stamps", 1420), conn.NewStdBind(), Options{}, clk, false)
	defer d.Close()
	must(t, d.Up())
	key := mustKey(t)
	must(t, d.Configure(&Config{PrivateKey: ptr(key)}))
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(d.boundPort.Load()))))
	must(t, err)
	defer c.Close()
	msgs := floodInitiations(t, key.PublicKey(), 2)
	send := func() {
		t.Helper()
		if _, err := c.Write(msgs[0]); err != nil {
			t.Fatal(err)
		}
	}
	rejected := func() uint64 {
		cs := d.Counters()
		return cs.Rejected[RejectInvalid] + cs.Rejected[RejectCookie]
	}
	send()
	waitFor(t, "the initiation handled", func() bool { return rejected() == 1 })
	if d.stamps.on.Load() {
		t.Fatal("receive timestamps on without load")
	}
	d.forceUnderLoad.Store(true)
	send()
	waitFor(t, "timestamps on under load", func() bool { return d.stamps.on.Load() })
	waitFor(t, "the initiation answered with a cookie", func() bool { return d.Drops().CookieRepliesSent == 1 })
	// Still under load at the first check: they stay on.
	clk.Advance(UnderLoadAfterTime)
	if !d.stamps.on.Load() {
		t.Fatal("receive timestamps turned off while under load")
	}
	d.forceUnderLoad.Store(false)
	clk.Advance(UnderLoadAfterTime)
	if d.stamps.on.Load() {
		t.Fatal("receive timestamps still on after load lapsed")
	}
	if n := d.Drops().HandshakeStale; n != 0 {
		t.Errorf("%d fresh handshake messages dropped as stale", n)
	}
	// On again, then the bind closed and reopened: off.
	d.forceUnderLoad.Store(true)
	send()
	waitFor(t, "timestamps on again", func() bool { return d.stamps.on.Load() })
	d.forceUnderLoad.Store(false)
	must(t, d.Down())
	must(t, d.Up())
	if d.stamps.on.Load() {
		t.Fatal("a reopened bind starts with timestamps on")
	}
}
