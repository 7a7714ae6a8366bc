package noise

// Handshake and MAC benchmarks, with the reference implementation's
// equivalents (prefixed Reference) as a baseline:
//
//	go test -run '^$' -bench . -benchmem -benchtime 100ms ./device/noise

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// cpuPerOp reports the process CPU time per operation ("cpu-ns/op") next to
// the wall time, which on a shared machine says more than ns/op. Use as
// defer cpuPerOp(b)() just before the loop.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func BenchmarkCreateInitiation(b *testing.B) {
	p := newPair(b, PresharedKey{}, PresharedKey{})
	now := time.Now()
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for i := 0; b.Loop(); i++ {
		if _, err := p.ab.CreateInitiation(uint32(i), now); err != nil {
			b.Fatal(err)
		}
	}
}

// resetReplay forgets the last initiation so the same one can be consumed
// again (the benchmark measures the full accept path).
func resetReplay(h *Handshake) {
	h.mu.Lock()
	h.lastTimestamp = Timestamp{}
	h.lastInitiation = time.Time{}
	h.mu.Unlock()
}

func BenchmarkConsumeInitiation(b *testing.B) {
	p := newPair(b, PresharedKey{}, PresharedKey{})
	now := time.Now()
	ini, _ := p.ab.CreateInitiation(1, now)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		resetReplay(p.ba)
		if _, err := ConsumeInitiation(p.b, &ini, now, p.findAtB); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreateResponse(b *testing.B) {
	p := newPair(b, PresharedKey{}, PresharedKey{})
	now := time.Now()
	ini, _ := p.ab.CreateInitiation(1, now)
	if _, err := ConsumeInitiation(p.b, &ini, now, p.findAtB); err != nil {
		b.Fatal(err)
	}
	h := p.ba
	h.mu.Lock()
	hash, ck, re, ri := h.hash, h.chainKey, h.remoteEphemeral, h.remoteIndex
	h.mu.Unlock()
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		h.mu.Lock()
		h.hash, h.chainKey, h.remoteEphemeral, h.remoteIndex, h.state = hash, ck, re, ri, stateInitiationConsumed
		h.mu.Unlock()
		if _, err := h.CreateResponse(2); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsumeResponse(b *testing.B) {
	p := newPair(b, PresharedKey{}, PresharedKey{})
	now := time.Now()
	ini, _ := p.ab.CreateInitiation(1, now)
	template := cloneInitiator(p.ab)
	h, _ := ConsumeInitiation(p.b, &ini, now, p.findAtB)
	res, _ := h.CreateResponse(2)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		ha := p.ab
		template.mu.Lock()
		ha.mu.Lock()
		ha.hash, ha.chainKey, ha.localEphemeral, ha.localIndex, ha.state = template.hash, template.chainKey, template.localEphemeral, template.localIndex, template.state
		ha.mu.Unlock()
		template.mu.Unlock()
		if _, err := ConsumeResponse(p.a, &res, p.findAtAr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeriveSession(b *testing.B) {
	p := newPair(b, PresharedKey{}, PresharedKey{})
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		p.ab.mu.Lock()
		p.ab.state = stateResponseConsumed
		p.ab.mu.Unlock()
		if _, err := p.ab.DeriveSession(p.t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckMAC1(b *testing.B) {
	p := newMACPair(b)
	msg := p.initiation(b, p.t0)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if !p.chk.CheckMAC1(msg) {
			b.Fatal("mac1 rejected")
		}
	}
}

func BenchmarkCheckMAC2(b *testing.B) {
	p := newMACPair(b)
	src := netip.MustParseAddrPort("192.0.2.1:1234")
	msg := p.initiation(b, p.t0)
	reply, _ := p.chk.CreateReply(msg, 1, src, p.t0)
	p.gen.ConsumeReply(&reply, p.t0)
	msg = p.initiation(b, p.t0)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if !p.chk.CheckMAC2(msg, src, p.t0) {
			b.Fatal("mac2 rejected")
		}
	}
}

func BenchmarkAddMACs(b *testing.B) {
	p := newMACPair(b)
	msg := p.initiation(b, p.t0)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		p.gen.AddMACs(msg, p.t0)
	}
}

func BenchmarkCreateCookieReply(b *testing.B) {
	p := newMACPair(b)
	src := netip.MustParseAddrPort("192.0.2.1:1234")
	msg := p.initiation(b, p.t0)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := p.chk.CreateReply(msg, 1, src, p.t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalUnmarshalInitiation(b *testing.B) {
	m := sampleInitiation()
	buf := make([]byte, 0, MessageInitiationSize)
	var out MessageInitiation
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if err := out.Unmarshal(m.MarshalTo(buf[:0])); err != nil {
			b.Fatal(err)
		}
	}
}

// refDevices builds two reference devices that know each other, on an
// in-memory link that carries nothing during the benchmarks.
func refDevices(b *testing.B) (a, c *device.Device, peerOfA, peerOfC *device.Peer) {
	ka, _ := GeneratePrivateKey()
	kc, _ := GeneratePrivateKey()
	binds := bindtest.NewChannelBinds()
	mk := func(i int, priv, peer PrivateKey) *device.Device {
		d := device.NewDevice(tuntest.NewChannelTUN().TUN(), binds[i], device.NewLogger(device.LogLevelSilent, ""))
		b.Cleanup(d.Close)
		if err := d.IpcSet(fmt.Sprintf("private_key=%s\npublic_key=%s\n", hexKey(priv), hexKey(peer.PublicKey()))); err != nil {
			b.Fatal(err)
		}
		// Peers only take part in handshakes on a device that is up.
		if err := d.Up(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	a, c = mk(0, ka, kc), mk(1, kc, ka)
	var pa, pc device.NoisePublicKey
	pa, pc = device.NoisePublicKey(kc.PublicKey()), device.NoisePublicKey(ka.PublicKey())
	return a, c, a.LookupPeer(pa), c.LookupPeer(pc)
}

func BenchmarkReferenceCreateInitiation(b *testing.B) {
	a, _, peer, _ := refDevices(b)
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := a.CreateMessageInitiation(peer); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReferenceConsumeInitiation feeds the same initiation again: the
// reference rejects the replay only after all its cryptography, so this
// measures the same work as an accepted initiation.
func BenchmarkReferenceConsumeInitiation(b *testing.B) {
	a, c, peer, _ := refDevices(b)
	msg, err := a.CreateMessageInitiation(peer)
	if err != nil {
		b.Fatal(err)
	}
	if c.ConsumeMessageInitiation(msg) == nil {
		b.Fatal("reference rejected a fresh initiation")
	}
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		c.ConsumeMessageInitiation(msg)
	}
}

// BenchmarkConsumeInitiationReplayed is ours on the same replay path.
func BenchmarkConsumeInitiationReplayed(b *testing.B) {
	p := newPair(b, PresharedKey{}, PresharedKey{})
	now := time.Now()
	ini, _ := p.ab.CreateInitiation(1, now)
	if _, err := ConsumeInitiation(p.b, &ini, now, p.findAtB); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := ConsumeInitiation(p.b, &ini, now.Add(time.Second), p.findAtB); err == nil {
			b.Fatal("replay accepted")
		}
	}
}
