# fish completion for wirelane. Generated from the program's own help
# (internal/tools/clidoc); do not edit.

function __wirelane_tunnels
	for f in /etc/wireguard/*.conf /var/run/wireguard/*.sock
		string replace -r '.*/(.*)\\.(conf|sock)$' '$1' -- $f
	end | sort -u
end

complete -c wirelane -f
complete -c wirelane -n __fish_use_subcommand -l help -s h -d 'print the list of commands'
complete -c wirelane -n __fish_use_subcommand -l version -s V -d 'print the version and the VCS revision it was built from'
complete -c wirelane -n __fish_use_subcommand -a up -d 'create and configure a tunnel from a wg-quick file'
complete -c wirelane -n __fish_use_subcommand -a down -d 'remove a tunnel made by up'
complete -c wirelane -n __fish_use_subcommand -a strip -d 'print the file without wg-quick-only keys'
complete -c wirelane -n __fish_use_subcommand -a save -d 'write a running tunnel\'s configuration back to its file'
complete -c wirelane -n __fish_use_subcommand -a reload -d 'change a running tunnel to match its file, keeping sessions'
complete -c wirelane -n __fish_use_subcommand -a list -d 'list the tunnels you can bring up or down, and their state'
complete -c wirelane -n __fish_use_subcommand -a show -d 'show tunnels, peers, handshakes and transfer'
complete -c wirelane -n __fish_use_subcommand -a events -d 'print the Wirelane service\'s events as they happen'
complete -c wirelane -n __fish_use_subcommand -a genkey -d 'print a new private key'
complete -c wirelane -n __fish_use_subcommand -a pubkey -d 'read a private key on stdin, print its public key'
complete -c wirelane -n __fish_use_subcommand -a genpsk -d 'print a new preshared key'
complete -c wirelane -n __fish_use_subcommand -a gateway -d 'site-to-site gateway from a TOML file'
complete -c wirelane -n __fish_use_subcommand -a demo -d 'build a tunnel between two namespaces and measure it (root)'
complete -c wirelane -n __fish_use_subcommand -a ovpn -d 'OpenVPN 2.6: join a server, serve clients, make keys'
complete -c wirelane -n '__fish_seen_subcommand_from up' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from up' -a '(__wirelane_tunnels)' -d tunnel
complete -c wirelane -n '__fish_seen_subcommand_from up' -F
complete -c wirelane -n '__fish_seen_subcommand_from down' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from down' -a '(__wirelane_tunnels)' -d tunnel
complete -c wirelane -n '__fish_seen_subcommand_from down' -F
complete -c wirelane -n '__fish_seen_subcommand_from strip' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from strip' -a '(__wirelane_tunnels)' -d tunnel
complete -c wirelane -n '__fish_seen_subcommand_from strip' -F
complete -c wirelane -n '__fish_seen_subcommand_from save' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from save' -l force -d 'save even a daemon up did not configure, or an interface without addresses, and count it as configured from now on (never a state without a private key)'
complete -c wirelane -n '__fish_seen_subcommand_from save' -a '(__wirelane_tunnels)' -d tunnel
complete -c wirelane -n '__fish_seen_subcommand_from save' -F
complete -c wirelane -n '__fish_seen_subcommand_from reload' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from reload' -l dry-run -d 'print the changes without applying them'
complete -c wirelane -n '__fish_seen_subcommand_from reload' -a '(__wirelane_tunnels)' -d tunnel
complete -c wirelane -n '__fish_seen_subcommand_from reload' -F
complete -c wirelane -n '__fish_seen_subcommand_from list' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from list' -l json -d 'print JSON for programs (the schema is in --help)'
complete -c wirelane -n '__fish_seen_subcommand_from show' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from show' -l json -d 'print JSON for programs (schema above)'
complete -c wirelane -n '__fish_seen_subcommand_from show' -a 'all interfaces'
complete -c wirelane -n '__fish_seen_subcommand_from show' -a '(__wirelane_tunnels)' -d tunnel
complete -c wirelane -n '__fish_seen_subcommand_from events' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from events' -l json -d 'print the events as JSON lines, as the service sends them'
complete -c wirelane -n '__fish_seen_subcommand_from genkey' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from pubkey' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from genpsk' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from gateway' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from gateway; and not __fish_seen_subcommand_from check show up down reload' -a 'check show up down reload'
complete -c wirelane -n '__fish_seen_subcommand_from gateway; and __fish_seen_subcommand_from check show up down reload' -F
complete -c wirelane -n '__fish_seen_subcommand_from demo' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from demo' -l duration -r -d 'length of the throughput test (0 skips it)'
complete -c wirelane -n '__fish_seen_subcommand_from demo' -l keep -d 'leave the namespaces and tunnel running for inspection'
complete -c wirelane -n '__fish_seen_subcommand_from demo' -l mtu -r -d 'MTU of the tunnel interfaces'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and not __fish_seen_subcommand_from connect serve genkey' -a connect -d 'join an OpenVPN 2.6 server as a client'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and not __fish_seen_subcommand_from connect serve genkey' -a serve -d 'run an OpenVPN server that OpenVPN 2.6 clients join'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and not __fish_seen_subcommand_from connect serve genkey' -a genkey -d 'write a new tls-crypt-v2 or tls-crypt key'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l auth-file -r -F -d 'file with the username and password lines for auth-user-pass (a username line alone: the password is asked for; default: ask on the terminal)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l block-ipv6 -d 'answer IPv6 packets into the tunnel with ICMPv6 no-route instead of sending them (as the block-ipv6 directive; with redirect-gateway, global IPv6 is routed into the tunnel)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l dev -r -d 'TUN interface name (default: the file\'s dev, tun means the kernel picks tunN)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l dns -r -d 'pushed DNS servers: auto (through systemd-resolved or resolvconf; with neither, connect fails) or off (not applied)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l mtu -r -d 'TUN MTU, 576 to 65535 (default: a tun-mtu the server pushes, else the file\'s tun-mtu, else 1500)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -l no-routes -d 'do not install pushed routes (addresses only)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -s v -d 'log protocol details and each ignored directive to stderr'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from connect' -F
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from serve' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from serve' -l dev -r -d 'TUN interface name (default: the file\'s dev, tun means the kernel picks tunN)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from serve' -s v -d 'log protocol details to stderr'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from serve' -F
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from genkey' -l help -d 'show this command'\''s help'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from genkey' -l metadata -r -d 'user metadata of a tls-crypt-v2-client key, base64 (default: the time of generation)'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from genkey' -l server-key -r -F -d 'tls-crypt-v2 server key file that wraps a tls-crypt-v2-client key'
complete -c wirelane -n '__fish_seen_subcommand_from ovpn; and __fish_seen_subcommand_from genkey' -F
