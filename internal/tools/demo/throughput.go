package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/sys/mono"
)

// Throughput measurement: one TCP stream from a client in one namespace to
// a server in another.
//
//	server goroutine (thread in ns B): listen, accept, read and count until EOF
//	client goroutine (thread in ns A): dial, write 128 KiB blocks until the deadline, close
//	caller: reports progress from the shared byte counter every tick
//
// The figure reported is what the server received over the time between
// its first and last byte.

// ThroughputResult holds the figures of one run.
type ThroughputResult struct {
	Bytes    uint64        // received by the server
	Duration time.Duration // from the first to the last byte received
}

// BitsPerSecond returns the received rate.
func (r ThroughputResult) BitsPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Bytes) * 8 / r.Duration.Seconds()
}

// Throughput runs a TCP transfer of about duration from client to
// server, both in their namespaces, listening on serverAddr. progress (if
// not nil) is called about every tick with the bytes received so far and
// the time since the first byte.
func Throughput(pctx context.Context, client, server *Namespace, serverAddr netip.Addr, duration, tick time.Duration, progress func(bytes uint64, elapsed time.Duration)) (ThroughputResult, error) {
	var ln net.Listener
	if err := server.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(serverAddr, 0).String())
		return err
	}); err != nil {
		return ThroughputResult{}, fmt.Errorf("throughput: listen: %w", err)
	}
	defer ln.Close()

	var (
		received atomic.Uint64
		firstNS  atomic.Int64 // unix nanos of the first byte, 0 before
		wg       sync.WaitGroup
		srvErr   error
		cliErr   error
		lastByte time.Time
	)
	ctx, cancel := context.WithCancel(pctx)
	defer cancel()

	wg.Add(2)
	go func() { // server side
		defer wg.Done()
		srvErr = server.Do(func() error {
			stop := context.AfterFunc(ctx, func() { ln.Close() })
			defer stop()
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			stopc := context.AfterFunc(ctx, func() { c.Close() })
			defer stopc()
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if received.Load() == 0 {
						firstNS.CompareAndSwap(0, mono.Now())
					}
					received.Add(uint64(n))
					lastByte = time.Now()
				}
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
			}
		})
		if srvErr != nil {
			cancel()
		}
	}()
	go func() { // client side
		defer wg.Done()
		cliErr = client.Do(func() error {
			d := net.Dialer{Timeout: 10 * time.Second}
			c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			if err != nil {
				return err
			}
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			buf := make([]byte, 128<<10)
			end := time.Now().Add(duration)
			c.SetWriteDeadline(end)
			for time.Now().Before(end) {
				if _, err := c.Write(buf); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						break
					}
					return err
				}
			}
			return c.(*net.TCPConn).CloseWrite()
		})
		if cliErr != nil {
			cancel()
		}
	}()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			var res ThroughputResult
			res.Bytes = received.Load()
			if f := firstNS.Load(); f != 0 {
				res.Duration = mono.Since(f, lastByte)
			}
			if err := pctx.Err(); err != nil {
				return res, err
			}
			if dl, ok := pctx.Deadline(); ok && !time.Now().Before(dl) {
				// A socket deadline taken from pctx can fire before
				// pctx itself reports it.
				return res, context.DeadlineExceeded
			}
			if cliErr != nil {
				return res, fmt.Errorf("throughput: client: %w", cliErr)
			}
			if srvErr != nil {
				return res, fmt.Errorf("throughput: server: %w", srvErr)
			}
			return res, nil
		case <-t.C:
			if progress != nil {
				var el time.Duration
				if f := firstNS.Load(); f != 0 {
					el = mono.Since(f, time.Now())
				}
				progress(received.Load(), el)
			}
		}
	}
}
