package main

import (
	"bytes"
	"testing"
)

func TestServiceOrDaemon(t *testing.T) {
	for _, c := range []struct {
		args    []string
		service bool
	}{
		{nil, true},
		{[]string{"--socket", "/tmp/x.sock"}, true},
		{[]string{"--metrics-address=127.0.0.1:9586"}, true},
		{[]string{"--group", "ops"}, true},
		{[]string{"--wireguard-dir", "/tmp/wg"}, true},
		{[]string{"--wirelane-dir=/tmp/wl"}, true},
		{[]string{"wg0"}, false},
		{[]string{"-f", "wg0"}, false},
		{[]string{"--foreground"}, false}, // the daemon's flag: its "missing interface name"
		{[]string{"--version"}, false},
	} {
		if got := isServiceCall(c.args); got != c.service {
			t.Errorf("isServiceCall(%q) = %v", c.args, got)
		}
	}
	var stderr bytes.Buffer
	if st := runService("wirelaned", []string{"--socket", "/tmp/x", "extra"}, &stderr); st != 2 {
		t.Errorf("an extra argument: status %d (%s)", st, stderr.String())
	}
}
