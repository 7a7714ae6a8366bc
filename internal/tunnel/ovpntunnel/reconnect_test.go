package ovpntunnel

import (
	"fmt"
	"net"
	"testing"

	"github.com/wirelane/wirelane/ovpn/client"
)

func TestRestartable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{client.ErrPingRestart, true},
		{fmt.Errorf("%w: RESTART", client.ErrRestart), true},
		{client.ErrServerExit, true},
		{fmt.Errorf("client: transport: %w", net.ErrClosed), true},
		{fmt.Errorf("%w: bad password", client.ErrAuthFailed), false},
		{fmt.Errorf("%w: HALT", client.ErrHalt), false},
		{client.ErrClosed, false},
	} {
		if got := restartable(c.err); got != c.want {
			t.Errorf("restartable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
