package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestUpSaysWhereTheDaemonLogs brings a tunnel up: up's output names the
// place the background daemon logs to, and when that is a file (no
// journal, no syslog), the daemon's start line is in it.
func TestUpSaysWhereTheDaemonLogs(t *testing.T) {
	logDaemon(t)
	if !strings.HasPrefix(daemonDesc, "built-in") {
		t.Skip("the built-in daemon is unusable here: " + daemonDesc)
	}
	ns := tnetns.New(t, "wll")
	ifname := tnetns.Unique("wll")
	priv, _ := genKey(t)
	conf := writeConf(t, ifname, fmt.Sprintf("[Interface]\nPrivateKey = %s\nAddress = 10.79.0.1/24\n", priv))
	out, err := wlIn(t, ns, "up", conf)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	defer wlIn(t, ns, "down", conf)
	m := regexp.MustCompile(`\S+: ` + regexp.QuoteMeta(ifname) + `: daemon \(pid \d+\) logs to (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("up did not say where the daemon logs:\n%s", out)
	}
	if !strings.HasPrefix(m[1], "/") {
		return // syslog or the journal: nothing to read back here
	}
	defer os.Remove(m[1])
	if filepath.Base(m[1]) != ifname+".log" {
		t.Errorf("log file %s, want one named after the interface", m[1])
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _ := os.ReadFile(m[1])
		if strings.Contains(string(data), "daemon ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start line in %s:\n%s", m[1], data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
