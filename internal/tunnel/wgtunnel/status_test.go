package wgtunnel

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func TestStatusOfATunnelThatIsDown(t *testing.T) {
	st, err := Status("wlnone0", Options{Engine: &fakeEngine{}})
	if err != nil {
		t.Fatalf("Status of a tunnel that is down failed: %v", err)
	}
	if st.Up || st.Stale || st.Device != nil || st.Name != "wlnone0" {
		t.Errorf("Status = %+v, want down", st)
	}
}

func TestStatusOfATunnelWhoseEngineDied(t *testing.T) {
	eng := &fakeEngine{devErr: fmt.Errorf("wlgone0: %w", syscall.ECONNREFUSED)}
	st, err := Status("wlgone0", Options{Engine: eng})
	if err != nil || st.Up || !st.Stale {
		t.Errorf("Status = %+v, %v; want down and stale", st, err)
	}
}

func TestStatusOfATunnelThatIsUp(t *testing.T) {
	eng := &fakeEngine{devs: map[string]*wgtypes.Device{"wlup0": {Name: "wlup0", ListenPort: 51820}}}
	st, err := Status("wlup0", Options{Engine: eng})
	if err != nil || !st.Up || st.Device == nil || st.Device.ListenPort != 51820 {
		t.Errorf("Status = %+v, %v; want up with its device", st, err)
	}
}

func TestStatusReportsAFailureToAsk(t *testing.T) {
	eng := &fakeEngine{devErr: errors.New("permission denied")}
	if _, err := Status("wlx0", Options{Engine: eng}); err == nil {
		t.Error("Status hid the engine's error")
	}
}
