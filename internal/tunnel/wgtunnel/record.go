package wgtunnel

// The record of the device instance Up configured, so that Save (and Down
// with SaveConfig) can tell it from a device that replaced it.
//
//	Up: engine started -> record "configuring" -> ... every step ... -> record "configured"
//	    a failed Up removes the record with the rest of its changes
//	Save: the record must say "configured" and name the instance that
//	    answers now; else the file is not written
//	Down, and the clean-up after a dead daemon: remove the record
//
// An instance is what the engine says names one run of a device (Daemon:
// the identity of its UAPI socket file, which a restarted daemon, or one
// started by something else, creates anew). Peers and endpoints an admin
// changes with `wg set` do not change it, so such changes are saved as
// wg-quick saves them; a daemon that restarted (and kept or was given its
// key, but not its peers and addresses) is refused.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// StateDir is the directory of the records of what Up configured
// (INTERFACE.json, mode 0600, in a directory of mode 0700). It is under
// /run, emptied at boot, when no daemon survives either. Tests point it
// elsewhere before the first Up.
var StateDir = "/run/wirelane/wg"

// ErrNotConfiguredByUp is returned by Save (and Down with SaveConfig) when
// the device that answers is not one Up finished configuring: Up never
// ran for it, was interrupted before its last step, or configured another
// instance (the daemon restarted or was replaced). Its state may lack the
// peers and addresses the file has, so the file is left as it is.
var ErrNotConfiguredByUp = errors.New("the daemon answering is not the one `wirelane up` configured")

// Instancer is implemented by engines that can name the instance of a
// running device: a string that is the same for as long as that device
// runs and differs for any device that replaces it. Up records it and
// Save compares it; with an engine that does not implement it, no record
// is kept and Save cannot make this check.
type Instancer interface {
	// Instance names the running instance of the device name.
	Instance(name string) (string, error)
}

var _ Instancer = (*Daemon)(nil)

// Instance names the daemon that answers for name by its UAPI socket
// file: file system, inode and modification time. A daemon binds a new
// socket when it starts; the time tells a new file from an old one whose
// inode number was reused. Changing the socket's mode or owner does not
// change it (that is the change time, not the modification time).
func (d *Daemon) Instance(name string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(uapi.SocketPath(name), &st); err != nil {
		return "", fmt.Errorf("%s: %w", uapi.SocketPath(name), err)
	}
	return fmt.Sprintf("socket %s dev %d inode %d mtime %d.%09d", uapi.SocketPath(name), st.Dev, st.Ino, st.Mtim.Sec, st.Mtim.Nsec), nil
}

// upRecord is the content of StateDir/INTERFACE.json.
type upRecord struct {
	Interface string `json:"interface"`
	// Config is the file Up read (for people reading the record).
	Config string `json:"config,omitempty"`
	// Instance is Instancer.Instance's answer when Up started the device.
	Instance string `json:"instance"`
	// Configured is set once every step of Up succeeded.
	Configured bool      `json:"configured"`
	Time       time.Time `json:"time"`
}

// recordPath is the record of interface name.
func recordPath(name string) string { return filepath.Join(StateDir, name+".json") }

// writeRecord records the running instance of cfg's device, configured or
// still being configured. Engines without instances keep no record.
func writeRecord(eng Engine, cfg *wgquick.Config, configured bool) error {
	in, ok := eng.(Instancer)
	if !ok {
		return nil
	}
	id, err := in.Instance(cfg.Name)
	if err != nil {
		return err
	}
	path := cfg.Path
	if abs, err := filepath.Abs(path); err == nil && path != "" {
		path = abs
	}
	data, err := json.MarshalIndent(upRecord{Interface: cfg.Name, Config: path, Instance: id, Configured: configured, Time: time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		return err
	}
	return replaceFile(recordPath(cfg.Name), append(data, '\n'), nil)
}

// removeRecord removes name's record, if there is one, and reports
// whether there was.
func removeRecord(name string) (bool, error) {
	err := os.Remove(recordPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// checkConfiguredByUp returns nil when the device answering for name is
// the instance Up recorded as configured, else an error wrapping
// ErrNotConfiguredByUp that says what is wrong. With an engine without
// instances there is nothing to compare, and it returns nil.
func checkConfiguredByUp(eng Engine, name string) error {
	in, ok := eng.(Instancer)
	if !ok {
		return nil
	}
	now, err := in.Instance(name)
	if err != nil {
		return fmt.Errorf("%w: cannot tell which daemon answers: %v", ErrNotConfiguredByUp, err)
	}
	p := recordPath(name)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: there is no record of an `up` of %s (%s), so it was started by something else (or by a wirelane older than this one)", ErrNotConfiguredByUp, name, p)
	}
	if err != nil {
		return fmt.Errorf("%w: cannot read the record of `up`: %v", ErrNotConfiguredByUp, err)
	}
	var r upRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%w: the record of `up` %s is damaged: %v", ErrNotConfiguredByUp, p, err)
	}
	at := r.Time.Local().Format(time.DateTime)
	switch {
	case r.Instance != now:
		return fmt.Errorf("%w: the daemon `up` configured at %s is gone and another answers (it restarted, or something else started it), which may lack the file's peers and addresses (%s records %s; now %s)", ErrNotConfiguredByUp, at, p, r.Instance, now)
	case !r.Configured:
		return fmt.Errorf("%w: the `up` that started it at %s did not finish configuring it (%s)", ErrNotConfiguredByUp, at, p)
	}
	return nil
}
