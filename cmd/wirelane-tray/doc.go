package main

// The description of wirelane-tray that the man page wirelane-tray(1) and
// its completions are generated from (internal/tools/clidoc): the same
// synopsis, description and flag set --help prints. doc_test.go fails
// when packaging/man/wirelane-tray.1 or the completions are not what this
// produces.

import (
	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

// programDoc describes wirelane-tray.
func programDoc() *clidoc.Program {
	fs, _ := newFlags("wirelane-tray", service.DefaultSocket)
	return &clidoc.Program{
		Name:        "wirelane-tray",
		Section:     "1",
		Summary:     "Wirelane's desktop tray: the service's tunnels in the panel",
		Synopsis:    []string{synopsis, "wirelane-tray --version | --help"},
		Description: description,
		Flags:       append(clidoc.FlagsOf(fs), clidoc.Flag{Name: "help", Usage: "print the usage and exit"}),
		Sections: []clidoc.Section{
			{Title: "Exit status", Text: `0 when the tray ends (Quit in its menu, SIGTERM or SIGINT), after
--help and --version, and with --autostart for a user outside the group;
1 when it cannot start (no D-Bus session bus); 2 for a bad flag or an
argument.`},
			{Title: "Files", Text: `/run/wirelane/wirelane.sock
 the service's API socket (--socket, WIRELANE_SOCKET).

/usr/local/share/applications/wirelane-tray.desktop
 the menu entry.

/etc/xdg/autostart/wirelane-tray.desktop
 the login entry (wirelane-tray --autostart).`},
			{Title: "See also", Text: `wirelane(8), wirelaned(8), zenity(1); docs/tray.md.`},
		},
	}
}
