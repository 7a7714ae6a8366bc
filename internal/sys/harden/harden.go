// Package harden holds process hardening that every Wirelane process
// holding keys applies: no core dumps or ptrace by unprivileged users
// (NoDump), and a check that files holding secrets are not readable by
// group or others (SecretFileMode).
package harden

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NoDump marks the process non-dumpable (PR_SET_DUMPABLE=0): no core
// file with keys in it, and /proc/self/mem and ptrace only for root. It
// lasts for the life of the process (until an execve).
func NoDump() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// SecretFileMode returns a warning when the file at path, which holds
// a secret (a key, a password), is readable or writable by its group or
// by others, and "" when it is not or cannot be examined (the caller's
// own read reports that).
func SecretFileMode(path string) string {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Sprintf("%s holds secrets but its mode is %04o (readable beyond its owner); chmod 600 it", path, perm)
	}
	return ""
}
