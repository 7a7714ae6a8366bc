package netcfg

import (
	"os"
	"path/filepath"
	"strings"
)

// Sysctl writes value to /proc/sys/KEY (KEY with dots or slashes). It is
// deliberately not undone: wg-quick leaves src_valid_mark on as well, and
// other tunnels may rely on it.
func (c *Conf) Sysctl(key, value string) error {
	c.logf("sysctl -q %s=%s", key, value)
	p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return os.WriteFile(p, []byte(value), 0o644)
}
