package tun

// Namespace plumbing shared by the tests that move a TUN interface between
// network namespaces: running ip, creating a namespace that is deleted when
// the test ends, and moving a link.

import (
	"os/exec"
	"testing"
)

// runIP runs ip with args and fails the test, showing ip's output, if it
// fails.
func runIP(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v\n%s", args, err, out)
	}
}

// newNamespace creates a network namespace with a unique name starting
// with prefix and returns the name (the test is skipped without ip on
// PATH). The namespace is deleted when the test
// ends, unless the test deleted it already.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2) on PATH to create network namespaces")
	}
	ns := uniqueName(prefix)
	runIP(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	return ns
}

// moveLink moves the interface name from namespace from ("": the test's
// own) into namespace to.
func moveLink(t *testing.T, name, from, to string) {
	t.Helper()
	if from == "" {
		runIP(t, "link", "set", name, "netns", to)
		return
	}
	runIP(t, "-n", from, "link", "set", name, "netns", to)
}

// readUntilError reads d in a goroutine, discarding packets and
// ErrTooManySegments, and delivers the first other error.
func readUntilError(d Device) <-chan error {
	errc := make(chan error, 1)
	go func() {
		bufs := make([][]byte, d.BatchSize())
		for i := range bufs {
			bufs[i] = make([]byte, 65536+16)
		}
		sizes := make([]int, len(bufs))
		for {
			if _, err := d.Read(bufs, sizes, 16); err != nil && err != ErrTooManySegments {
				errc <- err
				return
			}
		}
	}()
	return errc
}
