package config

// The rest of `openvpn --help`'s directives for the client parser, so
// that every one has a verdict (directives_test.go): the ones it refuses
// (they would change what is checked or how packets are protected, or
// they are commands, not directives), the ones it accepts with a warning
// (local-host and tuning settings not honoured), and more of the server's
// own, refused in a client file. Merged into the tables of client.go and
// roles.go at start.

import "maps"

var moreRefused = map[string]string{
	"capath":              "CA directories (give ca FILE)",
	"config":              "including other configuration files",
	"http-proxy-option":   "HTTP proxies",
	"socks-proxy-retry":   "SOCKS proxies",
	"pkcs11-cert-private": "PKCS#11 tokens", "pkcs11-id-management": "PKCS#11 tokens", "pkcs11-pin-cache": "PKCS#11 tokens",
	"pkcs11-private-mode": "PKCS#11 tokens", "pkcs11-protected-authentication": "PKCS#11 tokens",
	"plugin":       "plugins",
	"no-replay":    "turning replay protection off",
	"client-nat":   "client-side NAT rules",
	"bind-dev":     "binding the socket to a device or VRF",
	"mark":         "marking the tunnel's packets for policy routing",
	"genkey":       "an openvpn command, not a configuration directive (use openvpn --genkey)",
	"help":         "an openvpn command, not a configuration directive",
	"version":      "an openvpn command, not a configuration directive",
	"show-ciphers": "an openvpn command, not a configuration directive", "show-digests": "an openvpn command, not a configuration directive",
	"show-engines": "an openvpn command, not a configuration directive", "show-gateway": "an openvpn command, not a configuration directive",
	"show-pkcs11-ids": "an openvpn command, not a configuration directive", "show-tls": "an openvpn command, not a configuration directive",
	"mktun": "an openvpn command, not a configuration directive", "rmtun": "an openvpn command, not a configuration directive",
	"test-crypto": "an openvpn command, not a configuration directive",
}

var moreIgnored = map[string]string{
	"allow-pull-fqdn":         "pushed addresses must be IP addresses",
	"allow-recursive-routing": "",
	"comp-noadapt":            "nothing is ever compressed on send, so there is no adaptive compression to turn off",
	"dev-node":                "the TUN device is created by name",
	"disable-dco":             "Wirelane has no kernel offload to disable",
	"disable-occ":             "", "down-pre": "scripts are not run", "route-pre-down": "scripts are not run",
	"up-delay": "", "up-restart": "scripts are not run", "echo": "", "fast-io": "", "txqueuelen": "",
	"tcp-nodelay": "", "mlock": "", "mtu-disc": "", "mtu-test": "", "nice": "", "no-name-remapping": "",
	"passtos": "", "proto-force": "every connection's own proto is used", "redirect-private": "routes are applied by the caller",
	"remap-usr1": "", "route-gateway": "the pushed gateway is used", "route-ipv6-gateway": "the pushed gateway is used",
	"route-metric": "", "shaper": "", "status-version": "", "syslog": "", "tmp-dir": "",
	"ifconfig":        "the server pushes the tunnel address",
	"ifconfig-ipv6":   "the server pushes the tunnel address",
	"ifconfig-nowarn": "",
	"local":           "the socket is not bound to a local address",
	"tls-exit":        "", "tls-version-max": "TLS 1.3 stays allowed", "x509-track": "scripts are not run",
	"engine": "OpenSSL engines mean nothing here (Go's crypto is used)", "providers": "OpenSSL providers mean nothing here (Go's crypto is used)",
	"replay-persist": "", "single-session": "", "session-timeout": "not honoured: the session is not ended after it",
	"inactive":          "not honoured: the tunnel is not ended when idle",
	"ping-exit":         "not honoured: a silent server restarts the session (ping-restart) rather than ending it",
	"management-client": "no management interface", "management-client-auth": "no management interface",
	"management-client-group": "no management interface", "management-client-user": "no management interface",
	"management-forget-disconnect": "no management interface", "management-hold": "no management interface",
	"management-log-cache": "no management interface", "management-query-proxy": "no management interface",
	"management-query-remote": "no management interface", "management-signal": "no management interface",
	"management-up-down": "no management interface", "memstats": "", "gremlin": "a test facility", "lladdr": "TAP only",
	"keying-material-exporter": "scripts are not run",
}

// moreServerOnly are server directives a client file must not hold.
var moreServerOnly = []string{"auth-user-pass-optional", "connect-freq-initial", "ifconfig-push", "ifconfig-ipv6-push", "iroute-ipv6",
	"push-remove", "port-share", "max-routes-per-client", "tls-crypt-v2-verify", "vlan-accept", "vlan-pvid", "vlan-tagging",
	"stale-routes-check", "disable", "hash-size", "multihome", "opt-verify"}

func init() {
	maps.Copy(securityDirectives, moreRefused)
	maps.Copy(ignoredDirectives, moreIgnored)
	for _, n := range moreServerOnly {
		roleOf[n] = ServerRole
	}
}
