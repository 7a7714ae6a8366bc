package server

// The rest of `openvpn --help`'s directives for the server parser, so
// that every one has a verdict (directives_test.go, and
// docs/openvpn-directives.md): refused where ignoring them would change
// what is checked, who may connect or what clients get; warned where they
// concern the local host, tuning or a client's side. Merged into the
// tables of config.go at start.

import "maps"

var moreServerUnsupported = map[string]string{
	"auth-user-pass-optional": "username/password checks", "capath": "CA directories (give ca FILE)",
	"client-nat": "client NAT rules", "config": "including other configuration files", "disable": "per-client configuration",
	"ifconfig-push":      "per-client addresses",
	"ifconfig-ipv6-push": "per-client addresses", "iroute-ipv6": "client subnets", "push-remove": "per-client configuration",
	"push-reset": "per-client configuration", "port-share": "port sharing with another server", "mark": "marking packets for policy routing",
	"bind-dev": "binding the socket to a device or VRF", "no-replay": "turning replay protection off",
	"tls-crypt-v2-verify": "tls-crypt-v2", "verify-hash": "certificate fingerprint pinning", "ns-cert-type": "Netscape certificate types (use remote-cert-tls)",
	"tls-cert-profile": "TLS certificate profiles", "vlan-tagging": "VLAN tagging (TAP)", "vlan-accept": "VLAN tagging (TAP)",
	"vlan-pvid": "VLAN tagging (TAP)", "lladdr": "TAP devices", "http-proxy-option": "proxies", "socks-proxy-retry": "proxies",
	"pkcs11-id": "PKCS#11 tokens", "pkcs11-providers": "PKCS#11 tokens", "pkcs11-cert-private": "PKCS#11 tokens",
	"pkcs11-id-management": "PKCS#11 tokens", "pkcs11-pin-cache": "PKCS#11 tokens", "pkcs11-private-mode": "PKCS#11 tokens",
	"pkcs11-protected-authentication": "PKCS#11 tokens",
	"dns":                             "the server's own dns option (push \"dns ...\" to give clients DNS servers)",
	"genkey":                          "an openvpn command, not a configuration directive (use openvpn --genkey)",
	"help":                            "an openvpn command, not a configuration directive", "version": "an openvpn command, not a configuration directive",
	"show-ciphers": "an openvpn command, not a configuration directive", "show-digests": "an openvpn command, not a configuration directive",
	"show-engines": "an openvpn command, not a configuration directive", "show-gateway": "an openvpn command, not a configuration directive",
	"show-pkcs11-ids": "an openvpn command, not a configuration directive", "show-tls": "an openvpn command, not a configuration directive",
	"mktun": "an openvpn command, not a configuration directive", "rmtun": "an openvpn command, not a configuration directive",
	"test-crypto": "an openvpn command, not a configuration directive",
}

var moreServerIgnored = map[string]string{
	"allow-pull-fqdn": "a client directive", "allow-recursive-routing": "", "bind": "the server always binds its port",
	"block-ipv6": "a client directive (push it: push \"block-ipv6\")", "comp-noadapt": "nothing is ever compressed on send, so there is no adaptive compression to turn off",
	"connect-freq-initial": "not honoured: connect-freq and the stateless handshake limit new sessions",
	"dev-node":             "the TUN device is created by name", "disable-dco": "Wirelane has no kernel offload to disable",
	"disable-occ": "", "down-pre": "scripts are not run", "echo": "", "engine": "OpenSSL engines mean nothing here (Go's crypto is used)",
	"providers": "OpenSSL providers mean nothing here (Go's crypto is used)", "fast-io": "", "gremlin": "a test facility",
	"hash-size": "", "ifconfig": "the server's address comes from server NET MASK", "ifconfig-noexec": "", "ifconfig-nowarn": "",
	"ignore-unknown-option": "", "inactive": "not honoured", "ipchange": "scripts are not run",
	"keying-material-exporter": "scripts are not run", "management-client": "no management interface",
	"management-client-auth": "no management interface", "management-client-group": "no management interface",
	"management-client-user": "no management interface", "management-forget-disconnect": "no management interface",
	"management-hold": "no management interface", "management-log-cache": "no management interface",
	"management-query-passwords": "no management interface", "management-query-proxy": "no management interface",
	"management-query-remote": "no management interface", "management-signal": "no management interface",
	"management-up-down": "no management interface", "max-routes-per-client": "client subnets are not supported",
	"memstats": "", "mlock": "", "mtu-disc": "", "mtu-test": "", "nice": "", "no-name-remapping": "", "passtos": "",
	"persist-local-ip": "", "persist-remote-ip": "", "ping-exit": "not honoured", "ping-timer-rem": "", "proto-force": "",
	"redirect-gateway": "a client directive (push it)", "redirect-private": "a client directive (push it)", "remap-usr1": "",
	"replay-persist": "", "route-delay": "", "route-gateway": "the server pushes its own tunnel address",
	"route-ipv6-gateway": "", "route-metric": "", "route-noexec": "", "route-pre-down": "scripts are not run",
	"route-up": "scripts are not run", "rport": "a client directive", "session-timeout": "not honoured", "shaper": "",
	"single-session": "", "stale-routes-check": "", "syslog": "", "tcp-nodelay": "", "tls-exit": "", "tmp-dir": "",
	"up-delay": "", "up-restart": "scripts are not run", "x509-track": "scripts are not run",
	"push-peer-info": "a client directive",
}

func init() {
	maps.Copy(serverUnsupported, moreServerUnsupported)
	maps.Copy(serverIgnored, moreServerIgnored)
}
