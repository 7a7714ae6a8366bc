package netns

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestVethConnectsNamespaces(t *testing.T) {
	Need(t, "ping")
	a, b := New(t, "ta"), New(t, "tb")
	Veth(t, a, "eth-a", b, "eth-b")
	Run(t, a, "ip", "addr", "add", "10.77.0.1/24", "dev", "eth-a")
	Run(t, b, "ip", "addr", "add", "10.77.0.2/24", "dev", "eth-b")
	Run(t, a, "ping", "-c", "1", "-W", "2", "10.77.0.2")
	// The namespaces are separate: a has no route to b's loopback-only view.
	if out, err := Try(b, nil, "ping", "-c", "1", "-W", "1", "10.99.0.1"); err == nil {
		t.Fatalf("ping to an unrouted address succeeded: %s", out)
	}
}

func TestCleanupRemovesNamespaceAndProcesses(t *testing.T) {
	Need(t, "sleep")
	var name string
	var proc *Proc
	t.Run("inner", func(t *testing.T) {
		n := New(t, "tc")
		name = n.Name
		proc = Start(t, n, "sleep", "600")
	})
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), name) {
		t.Fatalf("namespace %s still listed after cleanup:\n%s", name, out)
	}
	select {
	case <-proc.done:
	case <-time.After(2 * time.Second):
		t.Fatal("background process still running after cleanup")
	}
}

func TestTryReportsFailure(t *testing.T) {
	Need(t)
	_, err := Try(nil, nil, "sh", "-c", "exit 3")
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "root namespace") {
		t.Fatalf("Try error = %v, want one naming the namespace and exit status 3", err)
	}
}

func TestUniqueNamesFitInterfaceNames(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		n := Unique("wlxyz")
		if len(n) > 15 {
			t.Fatalf("Unique name %q longer than 15 bytes", n)
		}
		if seen[n] {
			t.Fatalf("Unique returned %q twice", n)
		}
		seen[n] = true
	}
}
