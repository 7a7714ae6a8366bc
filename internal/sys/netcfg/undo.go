// Package netcfg changes a Linux network namespace through netlink
// (github.com/vishvananda/netlink, no `ip` subprocesses): links, addresses,
// routes, policy rules, sysctls and DNS (systemd-resolved over D-Bus, or
// resolvconf). Every change it makes pushes its inverse onto an Undo
// stack, so a caller that fails half way can put the namespace back as it
// found it.
//
// Pipeline of a change:
//
//	caller -> Conf method (one netlink request) -> on success push inverse on Undo
//	failure later -> Undo.Rollback (inverses run newest first, all attempted)
//	success       -> Undo.Discard (the changes stay)
package netcfg

import (
	"errors"
	"fmt"
)

// Undo is a stack of inverse operations. It is not safe for concurrent use:
// one goroutine builds a configuration and rolls it back.
type Undo struct {
	steps []undoStep
}

type undoStep struct {
	what string
	fn   func() error
}

// Push records fn as the inverse of the change described by what.
func (u *Undo) Push(what string, fn func() error) {
	if u == nil {
		return
	}
	u.steps = append(u.steps, undoStep{what, fn})
}

// Len returns the number of recorded inverses.
func (u *Undo) Len() int { return len(u.steps) }

// Rollback runs every recorded inverse, newest first. A failing inverse
// does not stop the others; all failures are returned joined.
func (u *Undo) Rollback() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		s := u.steps[i]
		if err := s.fn(); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.what, err))
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}

// Discard forgets the recorded inverses (the changes are kept).
func (u *Undo) Discard() { u.steps = nil }

// withoutUndo runs f, an inverse that calls Conf's own methods, without
// recording the inverse of its change.
func (c *Conf) withoutUndo(f func() error) error {
	u := c.Undo
	c.Undo = nil
	defer func() { c.Undo = u }()
	return f()
}
