package bench

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestSinkSegments(t *testing.T) {
	for _, c := range []struct {
		n, gso, segs int
		ok           bool
	}{
		{sinkPayload, 0, 1, true},
		{sinkPayload - 1, 0, 1, false},
		{sinkPayload + 1, 0, 1, false},
		{3 * sinkPayload, sinkPayload, 3, true},
		{40 * sinkPayload, sinkPayload, 40, true},
		{3*sinkPayload - 5, sinkPayload, 1, false}, // a short last segment: not one of ours
		{3 * sinkPayload, 1000, 1, false},          // another segment size
		{0, sinkPayload, 1, false},
	} {
		segs, ok := sinkSegments(c.n, c.gso)
		if segs != c.segs || ok != c.ok {
			t.Errorf("sinkSegments(%d, %d) = %d, %v; want %d, %v", c.n, c.gso, segs, ok, c.segs, c.ok)
		}
	}
}

// TestSinkCountsMergedRuns sends runs of the peers' datagrams as UDP GSO
// messages to the sink over a namespace's loopback, where a socket that
// asks for UDP GRO receives each run merged: the sink must count every
// datagram to its peer, with and without GRO, and with GRO must have seen
// merged messages (else the test measured nothing).
func TestSinkCountsMergedRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	ns := fmt.Sprintf("wlb-sink-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", netpeersGW.String() + "/32", "dev", "lo"},
		{"route", "add", "local", netip.PrefixFrom(peerAddr(0), 24).Masked().String(), "dev", "lo"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	for _, gro := range []string{"1", "0"} {
		t.Run("gro="+gro, func(t *testing.T) {
			t.Setenv(netpeersSinkGROEnv, gro)
			const peers, runs, perRun = 3, 20, 8
			var sink *net.UDPConn
			senders := make([]*net.UDPConn, peers)
			if err := inNetns(ns, func() error {
				var err error
				if sink, err = net.ListenUDP("udp4", &net.UDPAddr{IP: netpeersGW.AsSlice(), Port: netpeersSinkPort}); err != nil {
					return err
				}
				for i := range senders {
					if senders[i], err = net.DialUDP("udp4", &net.UDPAddr{IP: peerAddr(i).AsSlice()}, sink.LocalAddr().(*net.UDPAddr)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if rc, err := sink.SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20) })
			}
			s := &netpeersSide{loops: make([]peerLoop, peers), sink: sink, wake: make(chan struct{}, 1), done: make(chan struct{})}
			s.wakeAt.Store(noWake)
			var err error
			if s.sinkRaw, err = sink.SyscallConn(); err != nil {
				t.Fatal(err)
			}
			s.wg.Add(1)
			go s.runSink()
			time.Sleep(50 * time.Millisecond) // the sink has asked for GRO before the first run arrives

			run := make([]byte, perRun*sinkPayload)
			for k := range run {
				run[k] = byte(28 + k%sinkPayload)
			}
			oob := make([]byte, unix.CmsgSpace(2))
			h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
			h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			h.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], sinkPayload)
			for r := range runs {
				for i, c := range senders {
					if _, _, err := c.WriteMsgUDP(run, oob, nil); err != nil {
						t.Fatalf("run %d of peer %d: %v", r, i, err)
					}
				}
			}
			// One datagram, not a run, and one of the wrong size.
			if _, err := senders[0].Write(run[:sinkPayload]); err != nil {
				t.Fatal(err)
			}
			if _, err := senders[1].Write(run[:100]); err != nil {
				t.Fatal(err)
			}
			want := []uint64{runs*perRun + 1, runs*perRun + 1, runs * perRun}
			deadline := time.Now().Add(10 * time.Second)
			for s.total.Load() < want[0]+want[1]+want[2] && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			close(s.done)
			sink.Close()
			s.wg.Wait()
			for _, c := range senders {
				c.Close()
			}
			for i := range peers {
				if got := s.loops[i].delivered.Load(); got != want[i] {
					t.Errorf("peer %d: %d datagrams counted, want %d", i, got, want[i])
				}
			}
			if b := s.bad.Load(); b != 1 {
				t.Errorf("%d bad messages, want 1 (the short one)", b)
			}
			merged := s.merged.Load()
			t.Logf("%d merged messages", merged)
			if gro == "1" && merged == 0 {
				t.Error("UDP GRO on, but no message was a merged run")
			}
			if gro == "0" && merged != 0 {
				t.Errorf("UDP GRO off, but %d merged messages", merged)
			}
		})
	}
}
