package service

// Who may do what is decided per connection, from the credentials the
// kernel recorded when the client connected (SO_PEERCRED): file modes on
// the socket are not relied on (the socket is 0666 so that an unprivileged
// caller gets a clear refusal instead of EACCES).

import (
	"context"
	"fmt"
	"net"
	"os/user"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// role is what a caller may do; each role includes the ones below it.
type role int

const (
	roleNone     role = iota // nothing (only an explanation)
	roleMetrics              // /metrics only (the TCP metrics listener)
	roleOperator             // list, watch, metrics, up, down, auth answers
	roleRoot                 // also import and delete
)

// caller is the peer of one API connection.
type caller struct {
	uid, gid uint32
	pid      int32
	known    bool // credentials were read
	role     role
}

type callerKey struct{}

// connKey holds the request's net.Conn in its context (the event stream
// sizes its socket buffer).
type connKey struct{}

// callerOf returns the caller stored in ctx by the connection's context.
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// peerCred reads SO_PEERCRED from a unix socket connection.
func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix socket connection (%T)", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// roleFor decides the role of uid/gid: root is root; a caller whose
// primary group is group, or whose user is a member of it in the group
// database, is an operator; everyone else is nobody.
func roleFor(uid, gid uint32, group string) role {
	if uid == 0 {
		return roleRoot
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return roleNone // no such group: only root may use the service
	}
	if strconv.FormatUint(uint64(gid), 10) == g.Gid {
		return roleOperator
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return roleNone
	}
	gids, err := u.GroupIds()
	if err != nil {
		return roleNone
	}
	if slices.Contains(gids, g.Gid) {
		return roleOperator
	}
	return roleNone
}

// refusal explains to a caller why it may not do what it asked.
func (s *Server) refusal(c caller, need role) string {
	switch {
	case !c.known:
		return "permission denied: the service could not read the caller's credentials"
	case need == roleRoot:
		return fmt.Sprintf("permission denied: only root may do this (you are uid %d)", c.uid)
	default:
		return fmt.Sprintf("permission denied: uid %d is neither root nor a member of group %q", c.uid, s.cfg.Group)
	}
}
