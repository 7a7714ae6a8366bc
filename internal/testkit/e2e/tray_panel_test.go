package e2e

// wirelane-tray in a real panel: Xvfb, Debian's xfce4-panel (its systray
// plugin is the StatusNotifierWatcher and shows SNI items), the real
// service with a tunnel up. The test checks that the panel registered the
// item and draws its icon, that a click opens the menu, and that the item
// registers again with a restarted panel; with
// WIRELANE_TRAY_SCREENSHOT=FILE it keeps the screenshot of the open menu
// (scripts/tray-screenshot.sh, docs/tray.md).

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/testkit/dbustest"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/xwd"
)

// panelConfig is an xfconf channel with one panel along the top of the
// screen holding the status tray, then a spacer.
const panelConfig = `<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfce4-panel" version="1.0">
  <property name="configver" type="int" value="2"/>
  <property name="panels" type="array">
    <value type="int" value="1"/>
    <property name="panel-1" type="empty">
      <property name="position" type="string" value="p=6;x=0;y=0"/>
      <property name="length" type="uint" value="100"/>
      <property name="position-locked" type="bool" value="true"/>
      <property name="size" type="uint" value="32"/>
      <property name="plugin-ids" type="array">
        <value type="int" value="2"/>
        <value type="int" value="1"/>
      </property>
    </property>
  </property>
  <property name="plugins" type="empty">
    <property name="plugin-1" type="string" value="separator">
      <property name="expand" type="bool" value="true"/>
      <property name="style" type="uint" value="0"/>
    </property>
    <property name="plugin-2" type="string" value="systray">
      <property name="square-icons" type="bool" value="true"/>
    </property>
  </property>
</channel>
`

// screen is an X server (Xvfb) for the test, keeping its screen in an
// XWD file (-fbdir) that the test reads as its screenshot.
type screen struct{ display, fb string }

func startXvfb(t *testing.T, w, h int) *screen {
	t.Helper()
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fbdir := t.TempDir()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", fmt.Sprintf("%dx%dx24", w, h), "-nolisten", "tcp", "-fbdir", fbdir)
	cmd.ExtraFiles = []*os.File{wr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("Xvfb: %v", err)
	}
	wr.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
		r.Close()
	}()
	select {
	case n := <-line:
		if n == "" {
			t.Fatal("Xvfb printed no display number")
		}
		return &screen{display: ":" + n, fb: filepath.Join(fbdir, "Xvfb_screen0")}
	case <-time.After(15 * time.Second):
		t.Fatal("Xvfb printed no display number within 15 s")
	}
	return nil
}

// shot reads the screen.
func (s *screen) shot(t *testing.T) image.Image {
	t.Helper()
	b, err := os.ReadFile(s.fb)
	if err != nil {
		t.Fatalf("the screen: %v", err)
	}
	img, err := xwd.Decode(b)
	if err != nil {
		t.Fatalf("the screen: %v", err)
	}
	return img
}

// findColour returns the centre of the pixels within region close to
// (r, g, b), and how many there are.
func findColour(img image.Image, region image.Rectangle, r, g, b uint8) (image.Point, int) {
	var sx, sy, n int
	near := func(a, b uint32) bool { d := int(a>>8) - int(b); return d > -24 && d < 24 }
	for y := region.Min.Y; y < region.Max.Y; y++ {
		for x := region.Min.X; x < region.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, uint32(r)) && near(pg, uint32(g)) && near(pb, uint32(b)) {
				sx, sy, n = sx+x, sy+y, n+1
			}
		}
	}
	if n == 0 {
		return image.Point{}, 0
	}
	return image.Pt(sx/n, sy/n), n
}

// lit counts the pixels of region that are not black (Xvfb's empty root).
func lit(img image.Image, region image.Rectangle) int {
	n := 0
	for y := region.Min.Y; y < region.Max.Y; y++ {
		for x := region.Min.X; x < region.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r|g|b > 0x0f00 {
				n++
			}
		}
	}
	return n
}

// TestTrayInARealPanel: the tray in xfce4-panel, the service's tunnel up:
// the panel's own watcher has the item, the panel draws the green icon,
// a click on it opens the menu, and a restarted panel gets the item again.
func TestTrayInARealPanel(t *testing.T) {
	for _, p := range []string{"Xvfb", "xfce4-panel", "xdotool"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (apt: xvfb xfce4-panel xdotool): the real-panel test needs it", p)
		}
	}
	if err := buildErr["wirelane-tray"]; err != nil {
		t.Skipf("wirelane-tray did not build: %v", err)
	}
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatal(err)
	}
	defer sb.c.Down(context.Background(), sb.a)
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.78.0.2")
	green := true // the icon's colour: a tunnel up, nothing failed
	if os.Getenv("WIRELANE_TRAY_SCREENSHOT") != "" {
		// For the picture: a tunnel down beside it, and one failed.
		k, _ := wgtypes.GeneratePrivateKey()
		os.WriteFile(filepath.Join(sb.dir, "wireguard", "home.conf"), []byte("[Interface]\nPrivateKey = "+k.String()+"\nAddress = 10.93.0.1/24\n"), 0o600)
		os.WriteFile(filepath.Join(sb.dir, "wireguard", "lab.conf"), []byte(fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = 10.94.0.1/24\n", k, sb.portA)), 0o600)
		netns.Eventually(t, 5*time.Second, "the extra tunnels listed", func() error {
			if _, err := sb.c.Get(ctx, "lab"); err != nil {
				return err
			}
			return nil
		})
		sb.c.Up(ctx, "lab") // fails: its port is taken
		green = false
	}

	dir := t.TempDir()
	conf := filepath.Join(dir, "config", "xfce4", "xfconf", "xfce-perchannel-xml")
	os.MkdirAll(conf, 0o700)
	if err := os.WriteFile(filepath.Join(conf, "xfce4-panel.xml"), []byte(panelConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	os.MkdirAll(run, 0o700)
	// The bus starts xfconfd (the panel's settings) with its own
	// environment: set it before the bus.
	for k, v := range map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "config"), "XDG_CACHE_HOME": filepath.Join(dir, "cache"),
		"XDG_DATA_HOME": filepath.Join(dir, "data"), "XDG_RUNTIME_DIR": run} {
		t.Setenv(k, v)
	}
	scr := startXvfb(t, 720, 360)
	t.Setenv("DISPLAY", scr.display)
	bus := dbustest.StartBus(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", bus.Address)
	dbustest.StartNotifications(t, bus)
	conn := bus.Conn(t)

	start := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s:\n%s", name, out.String())
			}
		})
		return cmd
	}
	// No window manager runs: the panel would wait for one.
	watcher := func(want bool) {
		t.Helper()
		dbustest.Eventually(t, 30*time.Second, fmt.Sprintf("org.kde.StatusNotifierWatcher owned: %v", want), func() error {
			var has bool
			if err := conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, "org.kde.StatusNotifierWatcher").Store(&has); err != nil {
				return err
			}
			if has != want {
				return fmt.Errorf("owned: %v", has)
			}
			return nil
		})
	}
	panelProc := start("xfce4-panel", "--disable-wm-check")
	watcher(true)
	tray := start(filepath.Join(binDir, "wirelane-tray"), "--socket", sb.socket, "--verbose")

	// The panel's watcher lists the tray's item.
	var item dbustest.Item
	listed := func(what string) {
		t.Helper()
		dbustest.Eventually(t, 15*time.Second, what, func() error {
			v, err := conn.Object("org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher").GetProperty("org.kde.StatusNotifierWatcher.RegisteredStatusNotifierItems")
			if err != nil {
				return err
			}
			items, _ := v.Value().([]string)
			for _, it := range items {
				name, _, _ := strings.Cut(it, "/")
				var pid uint32
				if conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, name).Store(&pid) == nil && int(pid) == tray.Process.Pid {
					item = dbustest.Item{Bus: name, Path: "/StatusNotifierItem"}
					return nil
				}
			}
			return fmt.Errorf("registered: %q", items)
		})
	}
	listed("the panel's watcher lists the tray")

	// The panel draws the green icon (a tunnel is up) in its strip.
	var icon image.Point
	panel := image.Rect(0, 0, 720, 34)
	dbustest.Eventually(t, 15*time.Second, "the panel draws the tray's green icon", func() error {
		var n int
		c := [3]uint8{0x2e, 0x9d, 0x4f}
		if !green {
			c = [3]uint8{0xe6, 0x7e, 0x22} // orange: something failed
		}
		icon, n = findColour(scr.shot(t), panel, c[0], c[1], c[2])
		if n < 50 {
			return fmt.Errorf("%d pixels of the icon's colour in the panel", n)
		}
		return nil
	})

	// A click opens the menu below the panel.
	xdo := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("xdotool", args...).CombinedOutput(); err != nil {
			t.Fatalf("xdotool %v: %v\n%s", args, err, out)
		}
	}
	below := image.Rect(0, 40, 720, 360)
	xdo("mousemove", fmt.Sprint(icon.X), fmt.Sprint(icon.Y), "click", "1")
	var img image.Image
	dbustest.Eventually(t, 10*time.Second, "the menu opens", func() error {
		img = scr.shot(t)
		if n := lit(img, below); n < 5000 {
			return fmt.Errorf("%d lit pixels below the panel", n)
		}
		return nil
	})
	if out := os.Getenv("WIRELANE_TRAY_SCREENSHOT"); out != "" {
		// Open the up tunnel's details too, with the keyboard as a user
		// might: down over the three toggles to the details, then right.
		xdo("key", "--delay", "150", "Down", "Down", "Down", "Down", "Right")
		time.Sleep(1500 * time.Millisecond)
		img = scr.shot(t)
		var b bytes.Buffer
		png.Encode(&b, img)
		if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot written to %s", out)
		if m, err := dbustest.MenuOf(t, conn, item).Layout(); err == nil {
			t.Logf("the menu:\n%s", m.Dump())
		}
	}

	// The panel restarts: the tray registers with the new one's watcher.
	xdo("key", "Escape")
	panelProc.Process.Signal(syscall.SIGTERM)
	watcher(false)
	start("xfce4-panel", "--disable-wm-check")
	watcher(true)
	listed("the restarted panel's watcher lists the tray")
}
