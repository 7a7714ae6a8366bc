package netcfg

import (
	"errors"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Families lists the address families policy routing is set up for.
var Families = []int{unix.AF_INET, unix.AF_INET6}

func notFwmarkRule(fam, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = fam
	r.Table = table
	r.Mark = uint32(table)
	r.Invert = true
	return r
}

func suppressRule(fam int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = fam
	r.Table = unix.RT_TABLE_MAIN
	r.SuppressPrefixlen = 0
	return r
}

// AddDefaultRouteRules adds wg-quick's two policy rules for a default
// route through the tunnel in family fam:
//
//	not fwmark TABLE lookup TABLE     (everything but the tunnel's own UDP)
//	lookup main suppress_prefixlength 0   (specific routes still win)
//
// Both are removed on undo.
func (c *Conf) AddDefaultRouteRules(fam, table int) error {
	c.logf("ip %s rule add not fwmark %d table %d", famFlag(fam), table, table)
	nr := notFwmarkRule(fam, table)
	if err := c.h.RuleAdd(nr); err != nil {
		return err
	}
	c.Undo.Push("rule not fwmark", func() error { return ignoreGone(c.h.RuleDel(notFwmarkRule(fam, table))) })
	c.logf("ip %s rule add table main suppress_prefixlength 0", famFlag(fam))
	if err := c.h.RuleAdd(suppressRule(fam)); err != nil {
		return err
	}
	c.Undo.Push("rule suppress_prefixlength", func() error { return ignoreGone(c.h.RuleDel(suppressRule(fam))) })
	return nil
}

// DeleteDefaultRouteRules removes, in family fam, every rule that looks
// up table and every "lookup main suppress_prefixlength 0" rule, as
// `wg-quick down` does. It returns how many rules it removed.
func (c *Conf) DeleteDefaultRouteRules(fam, table int) (int, error) {
	rules, err := c.h.RuleList(fam)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for i := range rules {
		r := rules[i]
		switch {
		case r.Table == table:
			c.logf("ip %s rule delete table %d", famFlag(fam), table)
		case r.Table == unix.RT_TABLE_MAIN && r.SuppressPrefixlen == 0:
			c.logf("ip %s rule delete table main suppress_prefixlength 0", famFlag(fam))
		default:
			continue
		}
		r.Family = fam
		if err := c.h.RuleDel(&r); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Rules lists the policy rules of family fam (for checks and tests).
func (c *Conf) Rules(fam int) ([]netlink.Rule, error) { return c.h.RuleList(fam) }

// DeleteOrphanedDefaultRouteRules cleans up after a tunnel whose daemon
// died: in family fam it removes the "not fwmark TABLE lookup TABLE" rule
// when table holds no route any more (the interface and its routes are
// gone), and then the "lookup main suppress_prefixlength 0" rules, but only
// if no other tunnel's "not fwmark" rule still needs them. It returns how
// many rules it removed.
func (c *Conf) DeleteOrphanedDefaultRouteRules(fam, table int) (int, error) {
	if used, err := c.TableInUse(table); err != nil || used {
		return 0, err
	}
	rules, err := c.h.RuleList(fam)
	if err != nil {
		return 0, err
	}
	var errs []error
	n, others := 0, 0
	for i := range rules {
		r := rules[i]
		if !r.Invert || r.Mark == 0 {
			continue
		}
		if r.Table != table {
			others++
			continue
		}
		c.logf("ip %s rule delete table %d", famFlag(fam), table)
		r.Family = fam
		if err := c.h.RuleDel(&r); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if n == 0 || others > 0 {
		return n, errors.Join(errs...)
	}
	for i := range rules {
		r := rules[i]
		if r.Table != unix.RT_TABLE_MAIN || r.SuppressPrefixlen != 0 {
			continue
		}
		c.logf("ip %s rule delete table main suppress_prefixlength 0", famFlag(fam))
		r.Family = fam
		if err := c.h.RuleDel(&r); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// RemoveDefaultRouteRules removes, in family fam, the rules
// AddDefaultRouteRules added for table (DeleteDefaultRouteRules); they are
// added again on undo.
func (c *Conf) RemoveDefaultRouteRules(fam, table int) error {
	if _, err := c.DeleteDefaultRouteRules(fam, table); err != nil {
		return err
	}
	c.Undo.Push("removed rules", func() error {
		return c.withoutUndo(func() error { return c.AddDefaultRouteRules(fam, table) })
	})
	return nil
}
