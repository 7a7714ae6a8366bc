package ovpntunnel

// Process hardening for connect and serve: the process becomes
// non-dumpable before it reads keys, and files holding secrets that
// others can read get a warning (not an error: openvpn accepts them).

import (
	"github.com/wirelane/wirelane/internal/sys/harden"
	"github.com/wirelane/wirelane/ovpn/config"
)

// secretWarnings lists a warning for each file with secrets in it that
// is readable beyond its owner: the files c read keys and passwords
// from, the configuration file itself when it holds inline secrets, and
// extra (such as --auth-file; "" is skipped).
func secretWarnings(file string, c *config.Common, extra ...string) []string {
	paths := append([]string(nil), c.SecretFiles...)
	if c.InlineSecrets {
		paths = append(paths, file)
	}
	paths = append(paths, extra...)
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		if w := harden.SecretFileMode(p); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// noDump makes the process non-dumpable; a failure is reported and the
// command goes on.
func noDump(warnf func(format string, args ...any)) {
	if err := harden.NoDump(); err != nil {
		warnf("%v", err)
	}
}
