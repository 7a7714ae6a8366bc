package server

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// dropLines counts log records about dropped packets.
type dropLines struct{ n atomic.Int64 }

func (h *dropLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *dropLines) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "dropped") {
		h.n.Add(1)
	}
	return nil
}
func (h *dropLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *dropLines) WithGroup(string) slog.Handler      { return h }

// Junk sent to a client from its server's address is counted, not
// logged per packet.
func TestClientCountsDroppedPacketsWithoutLogging(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	echoResponder(s)
	h := &dropLines{}
	c := dialClient(t, f.clientConfig(t, s, "target", ""), client.Options{Logger: slog.New(h)})
	to := s.Clients()[0].Remote
	ctl, err := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: wire.SessionID{7}, ID: 5, Payload: []byte("junk")})
	if err != nil {
		t.Fatal(err)
	}
	dat := []byte{byte(wire.DataV2) << 3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}
	for i := 0; i < 500; i++ {
		_ = s.bind.Send([][]byte{ctl, dat}, conn.NewRoute(conn.Endpoint{Dst: to}, 0))
	}
	eventually(t, 3*time.Second, "drops counted", func() bool {
		st := c.Stats()
		return st.DroppedControl >= 400 && st.DroppedData >= 400
	})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	if n := h.n.Load(); n > 1 {
		t.Fatalf("%d log lines about dropped packets", n)
	}
}
