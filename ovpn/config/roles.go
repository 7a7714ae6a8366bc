package config

// Directives that belong to one side only. The parser refuses them in the
// other side's file (ErrWrongRole), so a client file given to the server,
// or a server file to the client, fails at its first such line.

// roleOf names the directives (and inline blocks) that belong to one side
// only; the parser refuses them in the other side's file.
var roleOf = map[string]Role{
	// Client only.
	"client": ClientRole, "tls-client": ClientRole, "pull": ClientRole, "remote": ClientRole,
	"remote-random": ClientRole, "remote-random-hostname": ClientRole, "nobind": ClientRole,
	"auth-user-pass": ClientRole, "auth-retry": ClientRole, "auth-nocache": ClientRole,
	"resolv-retry": ClientRole, "connect-retry": ClientRole, "connect-retry-max": ClientRole,
	"connect-timeout": ClientRole, "server-poll-timeout": ClientRole, "route-nopull": ClientRole,
	"pull-filter": ClientRole, "static-challenge": ClientRole, "auth-token-user": ClientRole,
	"http-proxy": ClientRole, "http-proxy-user-pass": ClientRole, "socks-proxy": ClientRole,
	// Server only.
	"server": ServerRole, "server-ipv6": ServerRole, "server-bridge": ServerRole, "mode": ServerRole,
	"tls-server": ServerRole, "push": ServerRole, "push-reset": ServerRole, "client-to-client": ServerRole,
	"duplicate-cn": ServerRole, "max-clients": ServerRole, "ifconfig-pool": ServerRole,
	"ifconfig-pool-persist": ServerRole, "ifconfig-ipv6-pool": ServerRole, "client-config-dir": ServerRole,
	"ccd-exclusive": ServerRole, "auth-user-pass-verify": ServerRole, "verify-client-cert": ServerRole,
	"client-cert-not-required": ServerRole, "client-connect": ServerRole, "client-disconnect": ServerRole,
	"learn-address": ServerRole, "iroute": ServerRole, "username-as-common-name": ServerRole,
	"auth-gen-token": ServerRole, "connect-freq": ServerRole, "tcp-queue-limit": ServerRole,
	"bcast-buffers": ServerRole, "tls-crypt-v2-verify": ServerRole, "tls-crypt-v2-max-age": ServerRole,
	"tls-crypt-v2-metadata-allow": ServerRole,
}
