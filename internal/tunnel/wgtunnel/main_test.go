package wgtunnel

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points StateDir at a directory of its own, so that Up in these
// tests never writes the machine's records.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wgtunnel-test-state")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	StateDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
