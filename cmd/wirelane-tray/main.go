// Command wirelane-tray is Wirelane's desktop tray: an icon in the panel
// whose menu lists the service's tunnels and switches them, imports tunnel
// files and asks for OpenVPN credentials (docs/tray.md). It talks only to
// the service's API socket; its user needs to be in the service's group.
//
//	wirelane-tray [--socket PATH] [--zenity PATH] [--autostart] [--group NAME] [--verbose]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"syscall"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/desktop/tray"
	"github.com/wirelane/wirelane/internal/sys/buildinfo"
	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

// synopsis is the usage line of --help and the man page.
const synopsis = "wirelane-tray [--socket PATH] [--zenity PATH] [--autostart] [--group NAME] [--verbose]"

// description is what --help and wirelane-tray(1) say the tray does.
const description = `Shows the Wirelane service's tunnels in the desktop's panel (a
StatusNotifierItem): the icon tells whether a tunnel is up, the menu lists
every tunnel with a switch, the details of those that are up (addresses,
per peer the endpoint, the latest handshake and the transfer), and imports
a tunnel file. Notifications say when a tunnel comes up, goes down
unexpectedly, fails or needs credentials; OpenVPN credentials are asked for
with zenity and sent to the service, never stored.

The user needs to be in the service's group (wirelane) to switch tunnels;
otherwise the menu says why it cannot. Importing needs root. With
--autostart (the login entry) it starts only for root and the group's
members.
WIRELANE_SOCKET=PATH names another socket, as --socket does.`

// oneDash finds the flag in the flag package's errors ("flag provided but
// not defined: -bogus").
var oneDash = regexp.MustCompile(`: -([A-Za-z0-9][-A-Za-z0-9]*)`)

// options are the tray's flags, as parsed.
type options struct {
	socket, zenity, group       *string
	autostart, verbose, version *bool
}

// newFlags defines the tray's flags; --help, the man page and the
// completions are all made from this one set. socket is --socket's
// default.
func newFlags(prog, socket string) (*flag.FlagSet, options) {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	var o options
	o.socket = fs.String("socket", socket, "the service's API `socket`")
	o.zenity = fs.String("zenity", "zenity", "the dialog `program` for files and credentials")
	o.autostart = fs.Bool("autostart", false, "started at login: do nothing unless the user is root or in --group")
	o.group = fs.String("group", "wirelane", "the service's `group` (for --autostart)")
	o.verbose = fs.Bool("verbose", false, "log what the tray does to standard error")
	o.version = fs.Bool("version", false, "print the version and exit")
	return fs, o
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command: it returns the exit status (2 for bad usage).
func run(args []string, stdout, stderr io.Writer) int {
	prog := "wirelane-tray"
	def := os.Getenv("WIRELANE_SOCKET")
	if def == "" {
		def = service.DefaultSocket
	}
	fs, o := newFlags(prog, def)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintf(stdout, "Usage: %s\n\n%s\n", synopsis, description)
			clidoc.WriteFlags(stdout, clidoc.FlagsOf(fs))
			return 0
		}
		// The flag package names the flag with one dash, whichever the
		// user typed; Wirelane's flags are spelt --name.
		msg := oneDash.ReplaceAllString(err.Error(), ": --$1")
		fmt.Fprintf(stderr, "%s: %s\nUsage: %s\nRun '%s --help' for the flags.\n", prog, msg, synopsis, prog)
		return 2
	}
	socket, zenity, autostart, group, verbose, version := o.socket, o.zenity, o.autostart, o.group, o.verbose, o.version
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", prog, fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Fprintf(stdout, "%s %s\n", prog, buildinfo.String())
		return 0
	}
	if *autostart && !member(*group) {
		// The login entry is installed for everyone; only those the
		// service would answer get a tray.
		if *verbose {
			fmt.Fprintf(stderr, "%s: not root and not in group %q: not starting (--autostart)\n", prog, *group)
		}
		return 0
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := tray.Run(ctx, tray.Config{Socket: *socket, Zenity: *zenity, Logger: log}); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

// member reports whether the user is root or a member of group, as the
// service decides it (primary group, or listed in the group database).
func member(group string) bool {
	if os.Geteuid() == 0 {
		return true
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return false
	}
	if strconv.Itoa(os.Getgid()) == g.Gid {
		return true
	}
	u, err := user.Current()
	if err != nil {
		return false
	}
	gids, err := u.GroupIds()
	return err == nil && slices.Contains(gids, g.Gid)
}
