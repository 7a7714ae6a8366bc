# fish completion for wirelaned. Generated from the program's own help
# (internal/tools/clidoc); do not edit.

function __wirelaned_tunnels
	for f in /etc/wireguard/*.conf /var/run/wireguard/*.sock
		string replace -r '.*/(.*)\\.(conf|sock)$' '$1' -- $f
	end | sort -u
end

complete -c wirelaned -f
complete -c wirelaned -n __fish_use_subcommand -l foreground -s f -d 'stay in the foreground (also WG_PROCESS_FOREGROUND=1)'
complete -c wirelaned -n __fish_use_subcommand -l log-file -r -F -d 'append the log to PATH instead of the journal or syslog'
complete -c wirelaned -n __fish_use_subcommand -l version -d 'print the version and the VCS revision it was built from'
complete -c wirelaned -n __fish_use_subcommand -l help -s h -d 'print the usage'
complete -c wirelaned -n __fish_use_subcommand -a '(__wirelaned_tunnels)' -d tunnel
