package conn

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// groPair opens a GSO sender and a GRO receiver and returns the receiver's
// IPv4 receive state, driven directly by the test.
func groPair(t *testing.T, gso bool) (a *StdBind, rs *recvState, dst netip.AddrPort) {
	t.Helper()
	a, _, _ = openBind(t, Options{DisableGSO: !gso, DisableGRO: true, DisableSourceWatch: true})
	b, _, bport := openBind(t, Options{DisableGSO: true, DisableSourceWatch: true})
	if on, _ := a.Offload(); on != gso {
		t.Skip("kernel has no UDP GSO")
	}
	if _, gro := b.Offload(); !gro {
		t.Skip("kernel has no UDP GRO")
	}
	return a, newRecvState(b.socks.Load().v4), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), bport)
}

// TestGROSpanAdapts: with GRO on, single datagrams are read a full batch
// per call once the receiver has seen that traffic is not coalesced.
func TestGROSpanAdapts(t *testing.T) {
	a, rs, dst := groPair(t, false) // loopback keeps only GSO trains coalesced
	bufs := makeBufs(IdealBatchSize, groBufferSize)
	sizes := make([]int, IdealBatchSize)
	eps := make([]Endpoint, IdealBatchSize)
	singles := func(n int) [][]byte { return makeBufs(n, 100) }
	r := NewRoute(Endpoint{Dst: dst}, 1)
	if err := a.Send(singles(8), r); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	n, err := rs.receive(bufs, sizes, eps)
	if err != nil {
		t.Fatal(err)
	}
	if n > IdealBatchSize/maxGROSegments {
		t.Fatalf("first call read %d datagrams; it should start with the safe span %d", n, IdealBatchSize/maxGROSegments)
	}
	for got := n; got < 8; got += n {
		if n, err = rs.receive(bufs, sizes, eps); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Send(singles(100), r); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n, err = rs.receive(bufs, sizes, eps); err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Fatalf("after single datagrams one call read %d of 100", n)
	}
}

// TestGROStashKeepsEveryDatagram: the receiver expects single datagrams
// (wide span) and instead finds ten 64-datagram trains queued: what does not
// fit is stashed and handed out by later calls, in order, none lost or
// repeated, every one with its sticky source.
func TestGROStashKeepsEveryDatagram(t *testing.T) {
	for _, views := range []bool{false, true} {
		t.Run(map[bool]string{false: "copies", true: "views"}[views], func(t *testing.T) {
			testGROStash(t, views)
		})
	}
}

func testGROStash(t *testing.T, views bool) {
	a, rs, dst := groPair(t, true)
	rs.views = views
	own := makeBufs(IdealBatchSize, groBufferSize)
	bufs := make([][]byte, IdealBatchSize)
	sizes := make([]int, IdealBatchSize)
	eps := make([]Endpoint, IdealBatchSize)
	r := NewRoute(Endpoint{Dst: dst}, 1)
	rs.span = IdealBatchSize // as after a call that saw only single datagrams
	const trains, per, size = 10, 64, 1000
	for tr := 0; tr < trains; tr++ {
		batch := stamped(per, size, uint32(tr))
		if err := a.Send(batch, r); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(30 * time.Millisecond)
	rs.u.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	next := 0
	stashed, viewed := false, false
	for calls := 0; next < trains*per; calls++ {
		if calls > 100 {
			t.Fatalf("only %d of %d datagrams after %d calls", next, trains*per, calls)
		}
		copy(bufs, own) // a caller that allows views restores its buffers
		n, err := rs.receive(bufs, sizes, eps)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.pend) > 0 {
			stashed = true
		}
		for i := 0; i < n; i++ {
			if views && cap(bufs[i]) == sizes[i] {
				viewed = true // handed out in place, not copied
			}
		}
		for i := 0; i < n; i++ {
			tr, idx := binary.BigEndian.Uint32(bufs[i][0:4]), binary.BigEndian.Uint32(bufs[i][4:8])
			if want := uint32(next); tr*per+idx != want || sizes[i] != size {
				t.Fatalf("datagram %d: train %d index %d size %d", next, tr, idx, sizes[i])
			}
			if eps[i].Src != dst.Addr() {
				t.Fatalf("datagram %d: sticky source %v, want %v", next, eps[i].Src, dst.Addr())
			}
			next++
		}
	}
	if !stashed {
		t.Fatal("the overflow never reached the stash: the test did not test it")
	}
	if viewed != views {
		t.Fatalf("views allowed %v, datagrams handed out as views %v", views, viewed)
	}
	if rs.drops != 0 {
		t.Fatalf("%d datagrams dropped", rs.drops)
	}
	if rs.span != IdealBatchSize/maxGROSegments {
		t.Fatalf("span after full trains is %d, want %d", rs.span, IdealBatchSize/maxGROSegments)
	}
}

// FuzzLayout drives the GRO layout and the stash with synthetic messages:
// whatever the batch size, read span and train shapes, the datagrams come
// out whole, in order, each exactly once, with their own endpoint.
func FuzzLayout(f *testing.F) {
	f.Add(uint8(128), uint8(2), []byte{0, 200, 64, 10, 0, 30, 0})
	f.Add(uint8(128), uint8(128), []byte{15, 160, 64, 15, 160, 64, 0, 10, 0})
	f.Add(uint8(3), uint8(3), []byte{1, 0, 7, 0, 0, 0, 2, 0, 200})
	f.Add(uint8(0x80|128), uint8(2), []byte{0, 200, 64, 10, 0, 30, 0})
	f.Add(uint8(0x80|4), uint8(3), []byte{15, 160, 64, 15, 160, 64, 0, 10, 0})
	f.Fuzz(func(t *testing.T, k, r uint8, spec []byte) {
		const bufSize = 4096
		views := k&0x80 != 0 // the high bit of k: hand segments out as views
		k &= 0x7f
		if k == 0 || k > IdealBatchSize {
			return
		}
		r = max(1, min(r, k))
		type msg struct{ l, gso int }
		var msgs []msg
		for len(spec) >= 3 && len(msgs) < int(r) {
			l := int(binary.BigEndian.Uint16(spec[0:2])) % (bufSize + 1)
			segs := int(spec[2]) % (maxGROSegments + 1)
			spec = spec[3:]
			gso := 0
			if segs > 1 && l > 1 {
				gso = max((l+segs-1)/segs, (l+maxGROSegments-1)/maxGROSegments)
				if gso >= l {
					gso = 0
				}
			}
			msgs = append(msgs, msg{l, gso})
		}
		rs := newRecvState(&udpSocket{})
		rs.views = views
		own := makeBufs(int(k), bufSize)
		bufs := append([][]byte(nil), own...)
		sizes := make([]int, k)
		eps := make([]Endpoint, k)
		readAt := int(k) - int(r)
		var want [][]byte
		var wantEP []Endpoint
		for m, ms := range msgs {
			b := bufs[readAt+m]
			for j := 0; j < ms.l; j++ {
				b[j] = byte(m*7 + j)
			}
			ep := Endpoint{Dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(1000+m)), Src: netip.MustParseAddr("127.0.0.9"), SrcIfindex: 1}
			l := putSockaddr(&rs.names[m], ep.Dst)
			oob := stickyControl(ep)
			if ms.gso > 0 {
				oob = append(oob, groControl(ms.gso)...)
			}
			copy(rs.oob[m][:], oob)
			rs.hdrs[m].Hdr.Namelen = l
			rs.hdrs[m].Hdr.SetControllen(len(oob))
			rs.hdrs[m].Len = uint32(ms.l)
			seg := ms.l
			if ms.gso > 0 {
				seg = ms.gso
			}
			for off := 0; ; off += seg {
				end := min(off+seg, ms.l)
				want = append(want, append([]byte(nil), b[off:end]...))
				wantEP = append(wantEP, ep)
				if end >= ms.l {
					break
				}
			}
		}
		var got [][]byte
		var gotEP []Endpoint
		o, _ := rs.layout(bufs, sizes, eps, nil, 0, readAt, len(msgs))
		for {
			for i := 0; i < o; i++ {
				got = append(got, append([]byte(nil), bufs[i][:sizes[i]]...))
				gotEP = append(gotEP, eps[i])
			}
			if rs.head >= len(rs.pend) {
				break
			}
			copy(bufs, own) // as a caller that allows views does
			o = rs.unstash(bufs, sizes, eps, nil)
		}
		if rs.drops != 0 {
			t.Fatalf("%d dropped", rs.drops)
		}
		if len(got) != len(want) {
			t.Fatalf("got %d datagrams, want %d", len(got), len(want))
		}
		for i := range want {
			if string(got[i]) != string(want[i]) || gotEP[i] != wantEP[i] {
				t.Fatalf("datagram %d: %d bytes from %v, want %d bytes from %v", i, len(got[i]), gotEP[i], len(want[i]), wantEP[i])
			}
		}
	})
}
