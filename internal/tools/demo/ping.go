package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// PingResult is the outcome of one echo request.
type PingResult struct {
	Seq int
	RTT time.Duration // valid when OK
	OK  bool
}

// Ping sends count ICMP echo requests to dst (IPv4) from inside ns, one
// per interval, waiting up to timeout for each reply. It uses a raw ICMP
// socket (root) and needs no ping binary.
func Ping(ctx context.Context, ns *Namespace, dst netip.Addr, count int, interval, timeout time.Duration) ([]PingResult, error) {
	if !dst.Is4() {
		return nil, errors.New("ping: only IPv4 destinations are supported")
	}
	var c *icmp.PacketConn
	err := ns.Do(func() error {
		var err error
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ping: open ICMP socket: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()

	id := os.Getpid() & 0xffff
	to := &net.IPAddr{IP: dst.AsSlice()}
	var results []PingResult
	buf := make([]byte, 1500)
	for seq := 1; seq <= count; seq++ {
		if seq > 1 {
			select {
			case <-ctx.Done():
				return results, ctx.Err()
			case <-time.After(interval):
			}
		}
		payload := make([]byte, 56)
		copy(payload, "wirelane demo")
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: payload}}
		wb, err := msg.Marshal(nil)
		if err != nil {
			return results, err
		}
		start := time.Now()
		if _, err := c.WriteTo(wb, to); err != nil {
			return results, fmt.Errorf("ping: send: %w", err)
		}
		res := PingResult{Seq: seq}
		c.SetReadDeadline(start.Add(timeout))
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				if ctx.Err() != nil {
					return results, ctx.Err()
				}
				break // timeout: this request is lost
			}
			rm, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || rm.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			echo, ok := rm.Body.(*icmp.Echo)
			if !ok || echo.ID != id || echo.Seq != seq || from.String() != dst.String() {
				continue // someone else's reply, or a late one
			}
			res.RTT, res.OK = time.Since(start), true
			break
		}
		results = append(results, res)
	}
	return results, nil
}
