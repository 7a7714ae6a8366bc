package main

// The description of wirelane that the man page wirelane(8) and the shell
// completions are generated from (internal/tools/clidoc). Commands,
// summaries and help texts come from the command table in main.go, flags
// from the flag sets the commands really parse (collected through
// describeFlags, and ovpnConnectFlags and ovpnServeFlags for ovpn), so
// none of them can drift from --help. doc_test.go compares the committed files under packaging/ with
// what this produces.

import (
	"flag"
	"strings"

	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

const docDescription = `wirelane brings WireGuard tunnels up and down from wg-quick files, as
wg-quick(8) does, with Wirelane's userspace WireGuard implementation
(wirelaned(8)) instead of the kernel module; shows them as wg(8) does;
makes keys; runs site-to-site gateways from TOML files; and joins or serves
OpenVPN 2.6 networks.

Commands that change interfaces, routes or firewall rules need root. Every
command takes --help. Flags may come before or after the arguments; "--"
ends them.

up starts the daemon in the background. Its log goes to the journal when
wirelane runs under systemd, to syslog otherwise (tag wirelaned), and up
says where on its "[#]" lines.`

var docSections = []clidoc.Section{
	{Title: "Environment", Text: `WIRELANE_DAEMON=PATH
 up runs "PATH IFNAME" instead of the built-in daemon (any userspace
 implementation with the wireguard-go command line).

WIRELANE_FIREWALL=off
 brings a default route up without the nftables anti-spoofing rules.

WIRELANE_AEAD=auto|generic
 generic forces the portable ChaCha20-Poly1305 instead of the AVX-512 one.

LOG_LEVEL=verbose|info|error|silent
 what the daemon started by up logs.

WIRELANE_SOCKET=PATH|off
 the Wirelane service's socket (default /run/wirelane/wirelane.sock) that
 list, show, up, down and events ask; off makes them ignore the service.`},
	{Title: "Files", Text: `/etc/wireguard/NAME.conf
 the wg-quick file of tunnel NAME.

/etc/wirelane/NAME.toml
 the gateway file of gateway NAME.

/var/run/wireguard/NAME.sock
 the UAPI socket of a running tunnel (root only).

/run/wirelane/wirelane.sock
 the Wirelane service's API socket (wirelaned(8)).`},
	{Title: "Exit status", Text: `0 on success, 1 when the command failed, 2 for a usage error (unknown
command or flag, wrong arguments), 130 when up or demo was interrupted and
removed what it had set up.`},
	{Title: "Examples", Text: `Bring a tunnel up, look at it, take it down:
  wirelane up wg0
  wirelane show wg0
  wirelane down wg0

The same tunnel as a systemd service, started at boot:
  systemctl enable --now wirelane@wg0`},
	{Title: "See also", Text: `wirelaned(8), wg(8), wg-quick(8), systemctl(1). The full guide is
docs/cli.md in the source tree.`},
}

// programDoc describes wirelane: every visible command of the table with
// its flags, "ovpn" with its two subcommands.
func programDoc() *clidoc.Program {
	p := &clidoc.Program{
		Name:        prog,
		Section:     "8",
		Summary:     "userspace WireGuard and OpenVPN tunnels",
		Synopsis:    []string{prog + " COMMAND [FLAGS] [ARGS]", prog + " --version | --help | help COMMAND"},
		Description: docDescription,
		Flags: []clidoc.Flag{
			{Name: "help", Short: "h", Usage: "print the list of commands"},
			{Name: "version", Short: "V", Usage: "print the version and the VCS revision it was built from"},
		},
		Sections: docSections,
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		d := &clidoc.Command{Name: c.name, Synopsis: c.args, Summary: c.summary, Help: strings.TrimSpace(c.help),
			Words: c.words, Args: c.complete, Flags: commandFlags(c)}
		if c.name == "ovpn" {
			d.Help = ""
			d.Subcommands = ovpnDoc()
		}
		p.Commands = append(p.Commands, d)
	}
	return p
}

// commandFlags runs c with describeFlags set and returns the flags its
// flag set defines.
func commandFlags(c *command) []clidoc.Flag {
	var flags []clidoc.Flag
	describeFlags = func(name string, fs *flag.FlagSet) { flags = clidoc.FlagsOf(fs) }
	defer func() { describeFlags = nil }()
	if c.name != "ovpn" {
		c.run([]string{"--help"})
	}
	return flags
}

// ovpnDoc describes "ovpn connect" and "ovpn serve" from their own usage
// texts and flag sets (ovpn.go).
func ovpnDoc() []*clidoc.Command {
	summaries := map[string]string{
		"connect": "join an OpenVPN 2.6 server as a client",
		"serve":   "run an OpenVPN server that OpenVPN 2.6 clients join",
		"genkey":  "write a new tls-crypt-v2 or tls-crypt key",
	}
	connect, _, _ := ovpnConnectFlags()
	serve, _ := ovpnServeFlags()
	genkey, _, _ := ovpnGenkeyFlags()
	var out []*clidoc.Command
	for _, sub := range []struct {
		name, usage string
		fs          *flag.FlagSet
	}{{"connect", ovpnConnectUsage, connect}, {"serve", ovpnServeUsage, serve}, {"genkey", ovpnGenkeyUsage, genkey}} {
		first, rest, _ := strings.Cut(sub.usage, "\n")
		out = append(out, &clidoc.Command{
			Name:     sub.name,
			Summary:  summaries[sub.name],
			Args:     clidoc.Args{Files: "*"},
			Synopsis: strings.TrimSpace(strings.TrimPrefix(first, "Usage: "+prog+" ovpn "+sub.name)),
			Help:     strings.TrimSpace(rest),
			Flags:    clidoc.FlagsOf(sub.fs),
		})
	}
	return out
}
