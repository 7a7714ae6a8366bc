package server

import (
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/rekeysoak"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
	"github.com/wirelane/wirelane/ovpn/internal/testtimers"
)

// Both ends renegotiate on the same short interval (shortened timers, 200
// ms, checked every 10 ms) over TCP, so one end's timer fires while the
// other's exchange is in progress, or both start the same key id at
// once. Neither may replace the key state the other started
// (control.ErrKeyStateBusy): every renegotiation finishes, none fails,
// the traffic goes on. The server's side of
// client.TestE2EClientRenegotiationDuringServers.
func TestRenegotiationsFromBothEndsCollide(t *testing.T) {
	const reneg = 200 * time.Millisecond
	f := newFixture(t)
	slog, slines := testlog.New(t)
	s := startServer(t, f.serverConfig(TCP), Options{Logger: slog, TransitionWindow: time.Second, Timers: testtimers.New(10*time.Millisecond, reneg)})
	echoResponder(s)
	clog, clines := testlog.New(t)
	c := dialClient(t, f.clientConfig(t, s, "collide", ""), client.Options{Logger: clog, TransitionWindow: time.Second,
		Timers: testtimers.New(10*time.Millisecond, reneg)})
	traffic := rekeysoak.StartTraffic(c, c.Pushed().Local.Addr(), s.TunnelAddress().Addr(), 2*time.Millisecond)

	const run = 2 * time.Second
	changes, last, lastChange := 0, c.KeyID(), time.Now()
	for end := time.Now().Add(run); time.Now().Before(end) && c.Err() == nil; time.Sleep(2 * time.Millisecond) {
		if id := c.KeyID(); id != last {
			last, lastChange = id, time.Now()
			changes++
		}
		if time.Since(lastChange) > 2*time.Second {
			t.Fatalf("key %d stayed primary for %v: a renegotiation did not finish", last, time.Since(lastChange))
		}
	}
	traffic.Stop()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if sent, answered := traffic.Counts(); answered >= sent {
			break
		}
	}
	sent, answered := traffic.Counts()
	deferred := strings.Count(slines.String(), "renegotiation deferred") + strings.Count(clines.String(), "renegotiation deferred")
	started := strings.Count(slines.String(), "msg=renegotiating")
	t.Logf("%d key changes in %v, %d started by the server; %d starts deferred; %d/%d echo replies", changes, run, started, deferred, answered, sent)
	if err := c.Err(); err != nil {
		t.Fatalf("session lost: %v", err)
	}
	if slines.Has("renegotiation failed") || clines.Has("renegotiation failed") || clines.Has("msg=renegotiation ") {
		t.Error("a renegotiation failed")
	}
	if changes < 4 || deferred == 0 {
		t.Fatalf("%d key changes, %d deferred starts: the renegotiations did not collide", changes, deferred)
	}
	if answered < sent*9/10 {
		t.Errorf("only %d of %d echo requests answered", answered, sent)
	}
}
