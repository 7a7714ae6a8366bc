package daemon

import (
	"log/slog"
	"net"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/sys/refmode"
	"github.com/wirelane/wirelane/tun"
)

// deviceEngine adapts device.Device to the daemon's engine.
type deviceEngine struct{ d *device.Device }

// newEngine creates the device on t with a real UDP bind and brings it up.
func newEngine(t tun.Device, log *slog.Logger) (engine, error) {
	if refmode.Enabled() {
		log.Info("ref mode: the conventional locked send path, for A/B measurements (a wirelane_refmode build)")
	}
	d := device.NewDevice(t, conn.NewStdBind(), device.Options{Logger: log})
	if err := d.Up(); err != nil {
		d.Close()
		return nil, err
	}
	return deviceEngine{d}, nil
}

func (e deviceEngine) ServeUAPI(c net.Conn)  { uapi.Serve(c, e.d) }
func (e deviceEngine) Done() <-chan struct{} { return e.d.Wait() }
func (e deviceEngine) Close()                { e.d.Close() }
