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
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/desktop/tray"
	"github.com/wirelane/wirelane/internal/sys/buildinfo"
)

const usage = `Usage: %[1]s [--socket PATH] [--zenity PATH] [--autostart] [--group NAME] [--verbose]

Shows the Wirelane service's tunnels in the desktop's panel (a
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
WIRELANE_SOCKET=PATH names another socket, as --socket does.

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	prog := "wirelane-tray"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, usage, prog); printFlags(stderr, fs) }
	def := os.Getenv("WIRELANE_SOCKET")
	if def == "" {
		def = service.DefaultSocket
	}
	socket := fs.String("socket", def, "the service's API `socket`")
	zenity := fs.String("zenity", "zenity", "the dialog `program` for files and credentials")
	autostart := fs.Bool("autostart", false, "started at login: do nothing unless the user is root or in --group")
	group := fs.String("group", "wirelane", "the service's `group` (for --autostart)")
	verbose := fs.Bool("verbose", false, "log what the tray does to standard error")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", prog, fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Printf("%s %s\n", prog, buildinfo.String())
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

// printFlags lists the flags spelt --name, as every Wirelane command does.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		arg := ""
		if name != "" {
			arg = " " + strings.ToUpper(name)
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s%s\n", f.Name, arg, text, def)
	})
}
