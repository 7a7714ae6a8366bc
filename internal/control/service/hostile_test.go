package service

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestSlowlorisIsCutOff: a client that dribbles its headers is
// disconnected after HeaderTimeout, and the service answers others
// meanwhile.
func TestSlowlorisIsCutOff(t *testing.T) {
	ts := startService(t, NewFakeHost(), Config{HeaderTimeout: 300 * time.Millisecond}, roleRoot)
	var conns []net.Conn
	for range 50 {
		c, err := net.Dial("unix", ts.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /v1/tunnels HTTP/1.1\r\nHost: wirelane\r\nX-Slow: ")
		conns = append(conns, c)
	}
	if code, _, _ := ts.do("GET", "/v1/tunnels", ""); code != 200 {
		t.Fatalf("a normal request while 50 clients dribble: %d", code)
	}
	start := time.Now()
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "a") // still dribbling
		// Closed: EOF, or a reset when the service closed with our byte
		// unread. A timeout means it was not.
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a slowloris connection was not closed: %v", err)
		}
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("slowloris connections lived %v", d)
	}
}

// TestGarbageAndHalfRequests: a client that sends garbage, or half a
// body and hangs up, gets an error or is dropped; the service goes on.
func TestGarbageAndHalfRequests(t *testing.T) {
	ts := startService(t, NewFakeHost(), Config{}, roleRoot)
	for _, raw := range []string{
		"\x00\x01\x02 garbage\r\n\r\n",
		"GET /v1/tunnels HTTP/9.9\r\n\r\n",
		"POST /v1/tunnels HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"name\":",
		"GET /v1/tunnels HTTP/1.1\r\nHost: x\r\nX-Big: " + string(make([]byte, 20000)) + "\r\n\r\n",
	} {
		c, err := net.Dial("unix", ts.socket)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(raw))
		c.Close()
	}
	if code, _, _ := ts.do("GET", "/v1/tunnels/wg0", ""); code != 200 {
		t.Fatalf("the service after hostile clients: %d", code)
	}
}
