package ovpntunnel

import (
	"errors"
	"testing"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
)

// After RESTART,[N] the redial starts with the remote after the one the
// session used; after anything else the list stays.
func TestNextServerRotatesTheRemotes(t *testing.T) {
	cfg := &config.Config{Remotes: []config.Remote{{Host: "a", Port: 1}, {Host: "b", Port: 1}, {Host: "c", Port: 1}}}
	if got := nextServerFrom(cfg, config.Remote{Host: "b", Port: 1}, client.ErrRestartNext); got.Remotes[0].Host != "c" || got.Remotes[2].Host != "b" || cfg.Remotes[0].Host != "a" {
		t.Fatalf("%+v (original %+v)", got.Remotes, cfg.Remotes)
	}
	if got := nextServerFrom(cfg, config.Remote{Host: "b", Port: 1}, errors.New("ping-restart")); got != cfg {
		t.Fatal("rotated for another reason")
	}
}
