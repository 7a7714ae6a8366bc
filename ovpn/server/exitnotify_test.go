package server

import (
	"errors"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
)

// At shutdown a cc-exit client is told RESTART, or with
// explicit-exit-notify 2 RESTART,[N] (go to the next server).
func TestExplicitExitNotify(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		notify int
		next   bool
	}{{0, false}, {1, false}, {2, true}} {
		cfg := f.serverConfig(UDP)
		cfg.ExplicitExitNotify = tc.notify
		s := startServer(t, cfg, Options{})
		c := dialClient(t, f.clientConfig(t, s, "client1", ""), client.Options{})
		s.Close()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("notify %d: the client was not told", tc.notify)
		}
		err := c.Err()
		if !errors.Is(err, client.ErrRestart) || errors.Is(err, client.ErrRestartNext) != tc.next {
			t.Fatalf("notify %d: %v", tc.notify, err)
		}
	}
	cfg, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\n"+testpki.FixtureInline+"explicit-exit-notify 2\n"), "s.conf", "")
	if err != nil || cfg.ExplicitExitNotify != 2 {
		t.Fatalf("%v %v", cfg, err)
	}
	if _, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\n"+testpki.FixtureInline+"explicit-exit-notify 3\n"), "s.conf", ""); err == nil || !strings.Contains(err.Error(), "s.conf:17: explicit-exit-notify") {
		t.Fatalf("explicit-exit-notify 3: %v", err)
	}
}
