package netcfg

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// DNS goes through resolvconf(8) when it is installed, as wg-quick does;
// there is no netlink interface for resolver configuration.

// ErrNoResolvconf is returned by SetDNS when resolvconf is not installed.
var ErrNoResolvconf = errors.New("resolvconf is not installed; DNS settings were not applied")

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

// SetDNS registers name servers and search domains for ifname with
// resolvconf (removed on undo). It returns ErrNoResolvconf, changing
// nothing, when resolvconf is missing.
func (c *Conf) SetDNS(ifname string, servers []netip.Addr, search []string) error {
	if len(servers) == 0 {
		return nil
	}
	rc, err := exec.LookPath("resolvconf")
	if err != nil {
		return ErrNoResolvconf
	}
	var in bytes.Buffer
	for _, s := range servers {
		fmt.Fprintf(&in, "nameserver %s\n", s)
	}
	if len(search) > 0 {
		fmt.Fprintf(&in, "search %s\n", strings.Join(search, " "))
	}
	name := resolvconfName(ifname)
	c.logf("resolvconf -a %s -m 0 -x", name)
	cmd := exec.Command(rc, "-a", name, "-m", "0", "-x")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("resolvconf -a %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	c.Undo.Push("dns", func() error { return c.UnsetDNS(ifname) })
	return nil
}

// UnsetDNS removes ifname's resolvconf record; missing resolvconf is not
// an error.
func (c *Conf) UnsetDNS(ifname string) error {
	rc, err := exec.LookPath("resolvconf")
	if err != nil {
		return nil
	}
	name := resolvconfName(ifname)
	c.logf("resolvconf -d %s -f", name)
	if out, err := exec.Command(rc, "-d", name, "-f").CombinedOutput(); err != nil {
		return fmt.Errorf("resolvconf -d %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}
