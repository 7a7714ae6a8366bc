package main

// The description of wirelaned that the man page wirelaned(8) is
// generated from (internal/tools/clidoc). Its options are those of
// daemon.Usage, the --help text: doc_test.go fails when the two differ and
// when packaging/man/wirelaned.8 is not what this produces.

import "github.com/wirelane/wirelane/internal/tools/clidoc"

// programDoc describes wirelaned.
func programDoc() *clidoc.Program {
	return &clidoc.Program{
		Name:    "wirelaned",
		Section: "8",
		Summary: "Wirelane's userspace WireGuard daemon",
		Synopsis: []string{
			"wirelaned [-f|--foreground] [--log-file PATH] INTERFACE-NAME",
			"wirelaned --version | --help",
			"wirelaned [--socket PATH] [--metrics-address HOST:PORT] [--group NAME] [--wireguard-dir DIR] [--wirelane-dir DIR]",
		},
		Description: `wirelaned runs a Wirelane WireGuard device on the TUN interface
INTERFACE-NAME, configured through /var/run/wireguard/INTERFACE-NAME.sock
with wg(8) or wirelane(8). It is a drop-in for wireguard-go: wg-quick(8)
uses it with
  WG_QUICK_USERSPACE_IMPLEMENTATION=wirelaned wg-quick up wg0
once wirelaned is on PATH (scripts/install.sh puts it in /usr/local/bin).

Without --foreground it returns once the interface and the socket are
ready and keeps running in the background. It exits when the interface is
deleted, when the socket file is removed, or on SIGTERM or SIGINT.`,
		Flags: []clidoc.Flag{
			{Name: "foreground", Short: "f", Usage: "stay in the foreground (also WG_PROCESS_FOREGROUND=1)"},
			{Name: "log-file", Arg: "PATH", Usage: "append the log to PATH instead of the journal or syslog"},
			{Name: "version", Usage: "print the version and the VCS revision it was built from"},
			{Name: "help", Short: "h", Usage: "print the usage"},
		},
		Args: clidoc.Args{Tunnels: true},
		Sections: []clidoc.Section{
			{Title: "Logs", Text: `In the foreground the daemon logs to standard error. A daemon that
detaches logs to the journal when its standard error is the journal
(JOURNAL_STREAM, as under systemd), with the journal's priorities; else,
when LOG_LEVEL is set, to the standard error it was started with; else to
syslog (facility daemon, tag: the program's name); with neither, to
/var/log/wirelane/INTERFACE-NAME.log. --log-file chooses a file instead.
The starting command prints where the log goes.`},
			{Title: "The service", Text: `Without an interface name, wirelaned runs the Wirelane service in
the foreground (the unit wirelaned.service): the local API of docs/api.md,
HTTP with JSON on the unix socket /run/wirelane/wirelane.sock (--socket),
with the tunnels, an event stream and Prometheus metrics at /metrics, also
on a TCP address with --metrics-address. Root may do everything; members of
the group wirelane (--group) may list, watch, read metrics and bring tunnels
up and down; everyone else is refused.

The service owns the tunnels of the wg-quick files in /etc/wireguard
(--wireguard-dir, NAME.conf), the gateway files in /etc/wirelane
(--wirelane-dir, NAME.toml) and the OpenVPN client and server files in its
openvpn-client and openvpn-server directories (NAME.ovpn). It brings them up
and down with the same code as wirelane up and down; each WireGuard tunnel
runs in its own wirelaned INTERFACE-NAME daemon, which outlives the
service: a restarted service finds the tunnels that are up and does not
bring them up again. OpenVPN tunnels run inside the service and end with
it. SIGHUP (systemctl reload wirelaned) reloads every tunnel that is up
from its file, in place, as wirelane reload does; a tunnel whose reload
fails is left as it was.`},
			{Title: "Environment", Text: `LOG_LEVEL=verbose|info|error|silent
 what is logged; unset: errors on standard error, and start, stop and
 errors in the journal, syslog or a file.

WG_PROCESS_FOREGROUND=1
 do not detach.

WG_TUN_FD, WG_UAPI_FD
 an already open TUN descriptor and listening UAPI socket to use.

WIRELANE_AEAD=auto|generic
 generic forces the portable ChaCha20-Poly1305.

GOMAXPROCS
 threads running Go code (default: the model's share of the CPUs, 1 of 2,
 2 of 4, 7 of 16; LOG_LEVEL=info, or the journal, shows the values chosen).

WIRELANE_INLINE_CRYPTO=0..128
 largest batch sealed or opened without the crypto workers (default: the
 model's, every batch on up to 4 CPUs).`},
			{Title: "Files", Text: `/var/run/wireguard/INTERFACE-NAME.sock
 the UAPI socket (mode 0600).

/etc/wireguard/NAME.conf, /etc/wirelane/NAME.toml,
/etc/wirelane/openvpn-client/NAME.ovpn, /etc/wirelane/openvpn-server/NAME.ovpn
 the service's tunnels (imported ones are stored there, mode 0600).

/run/wirelane/wirelane.sock
 the service's API socket (mode 0666; callers are checked by their
 credentials).

/var/log/wirelane/INTERFACE-NAME.log
 the log when there is no journal and no syslog.`},
			{Title: "See also", Text: `wirelane(8), wg(8), wg-quick(8), systemd.exec(5).`},
		},
	}
}
