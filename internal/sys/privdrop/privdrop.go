// Package privdrop drops a root process to an unprivileged user and
// group while it keeps the capabilities it still needs, the way OpenVPN
// 2.6 honours its user and group directives with libcap-ng:
//
//	Lookup(user, group) -> Target (before anything is set up, so an
//	    unknown name fails first)
//	... the tunnel is set up as root ...
//	Target.Drop(keep...) -> setgroups([gid]) and setgid(gid)
//	    -> setuid(uid) with the permitted set kept
//	    -> permitted = effective = keep, inheritable and ambient empty
//	    -> PR_SET_DUMPABLE=0 again (a uid change resets it to
//	       fs.suid_dumpable)
//	    -> read back: uid, gid and capabilities as asked, else an error
//
// Go runs a process on many threads and Linux keeps credentials per
// thread, so every change goes through libcap's cap package, whose
// psx mechanism applies it to all of the process's threads (with or
// without cgo).
package privdrop

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/wirelane/wirelane/internal/sys/harden"
)

// Target is a user and group to drop to; Lookup makes one.
type Target struct {
	// User and Group are the names as given ("" = not given).
	User, Group string
	// UID is the user's id (-1: no user given: the uid stays). GID is
	// the group's id: the group given, else the user's primary group
	// (-1: neither given).
	UID, GID int
}

// ErrUnknown marks a user or group name that the system does not know.
var ErrUnknown = errors.New("no such user or group")

// Lookup finds the ids of user and group ("" = not given). With a user
// but no group, the group is the user's primary group (OpenVPN would
// keep root's groups). Unknown names are errors wrapping ErrUnknown.
func Lookup(userName, groupName string) (Target, error) {
	t := Target{User: userName, Group: groupName, UID: -1, GID: -1}
	if userName != "" {
		u, err := user.Lookup(userName)
		if err != nil {
			var unk user.UnknownUserError
			if errors.As(err, &unk) {
				return t, fmt.Errorf("user %q: %w", userName, ErrUnknown)
			}
			return t, fmt.Errorf("user %q: %w", userName, err)
		}
		t.UID, _ = strconv.Atoi(u.Uid)
		t.GID, _ = strconv.Atoi(u.Gid)
	}
	if groupName != "" {
		g, err := user.LookupGroup(groupName)
		if err != nil {
			var unk user.UnknownGroupError
			if errors.As(err, &unk) {
				return t, fmt.Errorf("group %q: %w", groupName, ErrUnknown)
			}
			return t, fmt.Errorf("group %q: %w", groupName, err)
		}
		t.GID, _ = strconv.Atoi(g.Gid)
	}
	return t, nil
}

// Empty reports whether t asks for no change.
func (t Target) Empty() bool { return t.UID < 0 && t.GID < 0 }

// String describes t for progress lines ("user nobody (65534), group
// nogroup (65534)"; the ids are left out when not looked up).
func (t Target) String() string {
	var parts []string
	if t.User != "" || t.UID >= 0 {
		parts = append(parts, "user "+t.User+id(t.UID))
	}
	if t.Group != "" || t.GID >= 0 {
		name := t.Group
		if name == "" {
			name = "the user's primary group"
		}
		parts = append(parts, "group "+name+id(t.GID))
	}
	return strings.Join(parts, ", ")
}

// id is " (N)", or "" for -1.
func id(n int) string {
	if n < 0 {
		return ""
	}
	return fmt.Sprintf(" (%d)", n)
}

// Drop changes every thread of the process to t's group (the only
// supplementary group too) and user. With a user, the capabilities
// afterwards are exactly keep, effective and permitted; with a group
// only, the process stays root (as OpenVPN does). It must run as root
// (CAP_SETUID and CAP_SETGID); on an error the process may be half
// changed and must not go on.
func (t Target) Drop(keep ...cap.Value) error {
	if t.Empty() {
		return nil
	}
	if t.GID >= 0 {
		if err := cap.SetGroups(t.GID, t.GID); err != nil {
			return fmt.Errorf("setting group %d: %w", t.GID, err)
		}
	}
	if t.UID >= 0 {
		if err := cap.SetUID(t.UID); err != nil {
			return fmt.Errorf("setting user %d: %w", t.UID, err)
		}
		want := cap.NewSet()
		if err := errors.Join(want.SetFlag(cap.Permitted, true, keep...), want.SetFlag(cap.Effective, true, keep...)); err != nil {
			return err
		}
		if err := want.SetProc(); err != nil {
			return fmt.Errorf("keeping capabilities %v: %w", want, err)
		}
		if err := cap.ResetAmbient(); err != nil {
			return fmt.Errorf("clearing ambient capabilities: %w", err)
		}
		if got := cap.GetProc(); !sameSet(got, want) {
			return fmt.Errorf("capabilities are %v after the drop, want %v", got, want)
		}
	}
	// A change of uid or gid sets the dumpable flag to fs.suid_dumpable.
	if err := harden.NoDump(); err != nil {
		return err
	}
	if t.UID >= 0 && (os.Getuid() != t.UID || os.Geteuid() != t.UID) {
		return fmt.Errorf("uid is %d (euid %d) after the drop, want %d", os.Getuid(), os.Geteuid(), t.UID)
	}
	if t.GID >= 0 && (os.Getgid() != t.GID || os.Getegid() != t.GID) {
		return fmt.Errorf("gid is %d (egid %d) after the drop, want %d", os.Getgid(), os.Getegid(), t.GID)
	}
	return nil
}

// sameSet reports whether a and b hold the same capabilities.
func sameSet(a, b *cap.Set) bool {
	d, err := a.Cf(b)
	return err == nil && d == 0
}
