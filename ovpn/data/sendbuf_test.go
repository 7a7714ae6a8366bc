package data

import (
	"bytes"
	"errors"
	"testing"
)

// EncryptInto grows a small buffer once, keeps head free bytes before the
// packet, reuses the buffer afterwards, and what it seals opens to the
// payload on the other side: for UDP's head room (0) and TCP's (2), DATA_V1
// and DATA_V2, and a payload larger than MinSendBuffer.
func TestEncryptIntoSealsIntoTheReusedBuffer(t *testing.T) {
	for _, head := range []int{0, 2} {
		for _, peerID := range []uint32{7, 0xFFFFFF} {
			cli, srv := pair(t, AES256GCM, 1, peerID)
			var buf []byte
			for i, size := range []int{1, 100, 1400, 1400, 3000, 20} {
				p := bytes.Repeat([]byte{byte(i + 1)}, size)
				before := buf
				frame, err := cli.EncryptInto(&buf, head, p)
				if err != nil {
					t.Fatalf("head %d, peer-id %x, %d bytes: %v", head, peerID, size, err)
				}
				grew := head+Headroom+size+Tailroom > cap(before)
				if !grew && &buf[:1][0] != &before[:1][0] {
					t.Fatalf("head %d, %d bytes: a buffer of %d bytes was replaced", head, size, cap(before))
				}
				if grew && cap(buf) < max(MinSendBuffer, head+Headroom+size+Tailroom) {
					t.Fatalf("head %d, %d bytes: grew to only %d bytes", head, size, cap(buf))
				}
				if cap(frame) == 0 || &frame[:1][0] != &buf[:cap(buf)][cap(buf)-cap(frame)] {
					t.Fatalf("head %d, %d bytes: the frame is not in the buffer", head, size)
				}
				pkt := append(make([]byte, 0, len(frame)+Tailroom), frame[head:]...)
				got, kind, err := srv.Decrypt(pkt)
				if err != nil || kind != KindPacket || !bytes.Equal(got, p) {
					t.Fatalf("head %d, peer-id %x, %d bytes: opened %d bytes, kind %v, %v", head, peerID, size, len(got), kind, err)
				}
			}
		}
	}
}

func TestEncryptIntoErrors(t *testing.T) {
	cli, _ := pair(t, AES256GCM, 0, 0)
	var buf []byte
	if _, err := cli.EncryptInto(&buf, -1, []byte{1}); !errors.Is(err, ErrRoom) {
		t.Fatalf("negative head room: %v", err)
	}
	if _, err := NewChannel(0).EncryptInto(&buf, 2, []byte{1}); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
}

func TestEncryptIntoNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	cli, srv := pair(t, AES256GCM, 0, 0)
	p := make([]byte, 1400)
	var buf []byte
	rbuf := make([]byte, 2048)
	if _, err := cli.EncryptInto(&buf, 2, p); err != nil { // the one growth
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		frame, err := cli.EncryptInto(&buf, 2, p)
		if err != nil {
			t.Fatal(err)
		}
		n := copy(rbuf, frame[2:])
		if _, _, err := srv.Decrypt(rbuf[:n]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}
