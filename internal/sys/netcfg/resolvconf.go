package netcfg

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// resolvconf(8) takes a record per interface on standard input, as
// wg-quick gives it: `resolvconf -a NAME -m 0 -x`.

var ifaceOrderRE = regexp.MustCompile(`^([A-Za-z0-9-]+)\*$`)

// resolvconfName is the record name resolvconf gets for ifname, with the
// prefix Debian's interface-order file asks for (as wg-quick computes it).
func resolvconfName(ifname string) string {
	f, err := os.Open("/etc/resolvconf/interface-order")
	if err != nil {
		return ifname
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := ifaceOrderRE.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			return m[1] + "." + ifname
		}
	}
	return ifname
}

// findResolvconf returns the resolvconf on PATH, "" when there is none or
// when it is systemd-resolved's stand-in (a link to resolvectl, which
// works only while resolved runs; stub then reports that it was there).
func findResolvconf() (path string, stub bool) {
	rc, err := exec.LookPath("resolvconf")
	if err != nil {
		return "", false
	}
	if real, err := filepath.EvalSymlinks(rc); err == nil && filepath.Base(real) == "resolvectl" {
		return "", true
	}
	return rc, false
}

// resolvconfAdd registers d for ifname with the resolvconf at rc.
func (c *Conf) resolvconfAdd(rc, ifname string, d DNS) error {
	var in bytes.Buffer
	for _, s := range d.Servers {
		fmt.Fprintf(&in, "nameserver %s\n", s)
	}
	if len(d.Search) > 0 {
		fmt.Fprintf(&in, "search %s\n", strings.Join(d.Search, " "))
	}
	name := resolvconfName(ifname)
	c.logf("resolvconf -a %s -m 0 -x", name)
	cmd := exec.Command(rc, "-a", name, "-m", "0", "-x")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("resolvconf -a %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// resolvconfDelete removes ifname's record from the resolvconf at rc.
func (c *Conf) resolvconfDelete(rc, ifname string) error {
	name := resolvconfName(ifname)
	c.logf("resolvconf -d %s -f", name)
	if out, err := exec.Command(rc, "-d", name, "-f").CombinedOutput(); err != nil {
		return fmt.Errorf("resolvconf -d %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}
