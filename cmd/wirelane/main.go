// Command wirelane is Wirelane's user-facing tool: wg-quick's up, down,
// strip and save; wg's genkey, pubkey, genpsk and show; and demo, which
// builds and measures a tunnel between two network namespaces.
//
//	wirelane up|down|strip|save CONFIG_FILE|INTERFACE
//	wirelane reload [--dry-run] CONFIG_FILE|INTERFACE|FILE.toml
//	wirelane genkey | pubkey | genpsk
//	wirelane list [--json]
//	wirelane show [--json] [INTERFACE|all|interfaces]
//	wirelane events [--json]
//	wirelane demo [--duration D] [--mtu N] [--keep]
//	wirelane ovpn connect|serve|genkey [flags] ARGS
//	wirelane gateway check|show|up|down|reload FILE.toml|NAME
//	wirelane --version | --help | help COMMAND
//
// `wirelane daemon IFNAME` (not listed in the usage) runs the userspace
// daemon; `up` starts it by running this same binary.
//
// Exit status: 0 on success, 1 when the command failed, 2 for a usage
// error (unknown command or flag, wrong arguments), 130 when up or demo was
// interrupted and removed what it had set up. docs/cli.md is the guide.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wirelane/wirelane/internal/crypto/chachapoly"
	"github.com/wirelane/wirelane/internal/sys/buildinfo"
	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

const prog = "wirelane"

// command is one subcommand. The table below, each command's flag set and
// help text are the one source of --help, the man page wirelane(8) and the
// shell completions (doc.go).
type command struct {
	name     string
	args     string // argument synopsis for the usage line
	summary  string
	help     string // extra text after the usage line
	hidden   bool
	run      func(args []string) int
	complete clidoc.Args // what the arguments are, for completion
	words    []string    // fixed first arguments (gateway's subcommands)
}

// Completion of the tunnel commands' argument: a name from
// /etc/wireguard or a wg-quick file.
var tunnelArg = clidoc.Args{Tunnels: true, Files: "*.conf"}

var commands []*command

func init() {
	commands = []*command{
		{name: "up", args: "CONFIG_FILE|INTERFACE", summary: "create and configure a tunnel from a wg-quick file", help: upHelp, run: cmdUp, complete: tunnelArg},
		{name: "down", args: "CONFIG_FILE|INTERFACE", summary: "remove a tunnel made by up", help: downHelp, run: cmdDown, complete: tunnelArg},
		{name: "strip", args: "CONFIG_FILE|INTERFACE", summary: "print the file without wg-quick-only keys", help: stripHelp, run: cmdStrip, complete: tunnelArg},
		{name: "save", args: "[--force] CONFIG_FILE|INTERFACE", summary: "write a running tunnel's configuration back to its file", help: saveHelp, run: cmdSave, complete: tunnelArg},
		{name: "reload", args: "[--dry-run] CONFIG_FILE|INTERFACE|FILE.toml", summary: "change a running tunnel to match its file, keeping sessions", help: reloadHelp, run: cmdReload, complete: tunnelArg},
		{name: "list", args: "[--json]", summary: "list the tunnels you can bring up or down, and their state", help: listHelp, run: cmdList},
		{name: "show", args: "[--json] [INTERFACE|all|interfaces]", summary: "show tunnels, peers, handshakes and transfer", help: showHelp, run: cmdShow, complete: clidoc.Args{Tunnels: true, Words: []string{"all", "interfaces"}}},
		{name: "events", args: "[--json]", summary: "print the Wirelane service's events as they happen", help: eventsHelp, run: cmdEvents},
		{name: "genkey", summary: "print a new private key", help: genkeyHelp, run: cmdGenkey},
		{name: "pubkey", summary: "read a private key on stdin, print its public key", help: pubkeyHelp, run: cmdPubkey},
		{name: "genpsk", summary: "print a new preshared key", help: genpskHelp, run: cmdGenpsk},
		{name: "gateway", args: "check|show|up|down|reload FILE.toml|NAME", summary: "site-to-site gateway from a TOML file", help: gatewayHelp, run: cmdGateway, words: []string{"check", "show", "up", "down", "reload"}, complete: clidoc.Args{Files: "*.toml"}},
		{name: "demo", args: "[--duration D] [--mtu N] [--keep]", summary: "build a tunnel between two namespaces and measure it (root)", help: demoHelp, run: cmdDemo},
		{name: "ovpn", args: "connect|serve|genkey [flags] ARGS", summary: "OpenVPN 2.6: join a server, serve clients, make keys", help: ovpnHelp, run: cmdOvpn},
		{name: "daemon", args: "[-f] IFNAME", summary: "run the userspace daemon", hidden: true, run: cmdDaemon},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s <command> [<args>]\n\nCommands:\n", prog)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's details, '%s --version' for\nthe version; 'man wirelane' has it all.\n", prog, prog)
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help":
		usage(os.Stdout)
		return 0
	case "help":
		// "help CMD" is "CMD --help"; plain "help" is the command list.
		if len(args) == 1 {
			usage(os.Stdout)
			return 0
		}
		args = append(args[1:2:2], "--help")
	case "--version", "-V":
		fmt.Printf("%s %s\n", prog, buildinfo.String())
		return 0
	}
	if err := chachapoly.EnvError(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 1
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "%s: unknown command %q\n", prog, args[0])
	usage(os.Stderr)
	return 2
}

func find(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	panic("no command " + name)
}

// describeFlags, when set, is called by parseFlags with the command's flag
// set instead of parsing: doc.go collects every command's flags this way
// for the man page and the completions.
var describeFlags func(name string, fs *flag.FlagSet)

// errHelp tells the caller --help was printed (exit 0).
var errHelp = flag.ErrHelp

// parseFlags parses a command's flags with the standard rules (-x and --x
// alike). It prints usage and returns (nil, 2) for bad flags, (nil, 0)
// after --help.
func parseFlags(fs *flag.FlagSet, name string, args []string, minArgs, maxArgs int) ([]string, int) {
	c := find(name)
	fs.SetOutput(io.Discard)
	if describeFlags != nil {
		describeFlags(name, fs)
		return nil, 0
	}
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "%s\n", strings.TrimSpace(fmt.Sprintf("Usage: %s %s %s", prog, c.name, c.args)))
		if c.help != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
		}
		clidoc.WriteFlags(w, clidoc.FlagsOf(fs))
	}
	// Flags may come before or after the arguments ("show wg0 --json").
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, errHelp) {
				printUsage(os.Stdout)
				return nil, 0
			}
			fmt.Fprintf(os.Stderr, "%s %s: %v\n", prog, name, err)
			printUsage(os.Stderr)
			return nil, 2
		}
		if fs.NArg() == 0 {
			break
		}
		if n := len(args) - fs.NArg(); n > 0 && args[n-1] == "--" {
			rest = append(rest, fs.Args()...) // everything after "--" is an argument
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(rest) < minArgs || len(rest) > maxArgs {
		fmt.Fprintf(os.Stderr, "%s %s: wrong number of arguments\n", prog, name)
		printUsage(os.Stderr)
		return nil, 2
	}
	return rest, -1
}

// usageError prints "wirelane NAME: err" and the command's usage, and
// returns exit status 2.
func usageError(name string, err error) int {
	c := find(name)
	fmt.Fprintf(os.Stderr, "%s %s: %v\n", prog, name, err)
	fmt.Fprintf(os.Stderr, "%s\n", strings.TrimSpace(fmt.Sprintf("Usage: %s %s %s", prog, c.name, c.args)))
	return 2
}

// exitInterrupted is the status after SIGINT/SIGTERM (128 + SIGINT, as
// shells report an interrupted command).
const exitInterrupted = 130

// failCtx is fail for commands that undo their work when interrupted: an
// interruption is reported as such (status 130), not as the error of the
// step it cut short. The commands join clean-up failures after the cause
// (errors.Join(cause, cleanupErr)); those are still reported.
func failCtx(ctx context.Context, name string, err error) int {
	if ctx.Err() == nil {
		return fail(err)
	}
	var cleanup []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 1 {
			cleanup = errs[1:]
		}
	}
	if len(cleanup) > 0 {
		fmt.Fprintf(os.Stderr, "%s %s: interrupted, and the clean-up failed: %v\n", prog, name, errors.Join(cleanup...))
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s %s: interrupted; everything it had set up was removed\n", prog, name)
	return exitInterrupted
}

// fail prints "wirelane: err" and returns exit status 1.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	return 1
}
