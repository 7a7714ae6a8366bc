package netcfg

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ErrNoLink is returned when an interface does not exist.
var ErrNoLink = errors.New("no such interface")

// Link returns the interface called name.
func (c *Conf) Link(name string) (netlink.Link, error) {
	l, err := c.h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%s: %w", name, ErrNoLink)
		}
		return nil, err
	}
	return l, nil
}

// LinkExists reports whether an interface called name exists.
func (c *Conf) LinkExists(name string) bool {
	_, err := c.Link(name)
	return err == nil
}

// DeleteLink removes the interface (its addresses and routes go with it).
func (c *Conf) DeleteLink(name string) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	c.logf("ip link delete dev %s", name)
	return c.h.LinkDel(l)
}

// PushDeleteLink records "delete the interface" on the undo stack: the
// inverse of creating it (which a daemon does, not netlink).
func (c *Conf) PushDeleteLink(name string) {
	c.Undo.Push("link "+name, func() error {
		err := c.DeleteLink(name)
		if errors.Is(err, ErrNoLink) {
			return nil
		}
		return err
	})
}

// SetMTU sets the interface's MTU. The old MTU is restored on undo.
func (c *Conf) SetMTU(name string, mtu int) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	old := l.Attrs().MTU
	c.logf("ip link set mtu %d dev %s", mtu, name)
	if err := c.h.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set MTU %d on %s: %w", mtu, name, err)
	}
	c.Undo.Push("mtu", func() error { return c.h.LinkSetMTU(l, old) })
	return nil
}

// SetUp brings the interface up (down again on undo).
func (c *Conf) SetUp(name string) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	c.logf("ip link set up dev %s", name)
	if err := c.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	c.Undo.Push("up", func() error { return c.h.LinkSetDown(l) })
	return nil
}

// MoveToNetns moves the interface into the namespace ns. Not undone:
// the caller owns the namespace's lifetime.
func (c *Conf) MoveToNetns(name string, ns netns.NsHandle) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	c.logf("ip link set %s netns ...", name)
	return c.h.LinkSetNsFd(l, int(ns))
}
