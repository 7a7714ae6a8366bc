# fish completion for wirelane-tray. Generated from the program's own help
# (internal/tools/clidoc); do not edit.

function __wirelane_tray_tunnels
	for f in /etc/wireguard/*.conf /var/run/wireguard/*.sock
		string replace -r '.*/(.*)\\.(conf|sock)$' '$1' -- $f
	end | sort -u
end

complete -c wirelane-tray -f
complete -c wirelane-tray -n __fish_use_subcommand -l autostart -d 'started at login: do nothing unless the user is root or in --group'
complete -c wirelane-tray -n __fish_use_subcommand -l group -r -d 'the service\'s group (for --autostart)'
complete -c wirelane-tray -n __fish_use_subcommand -l socket -r -d 'the service\'s API socket'
complete -c wirelane-tray -n __fish_use_subcommand -l verbose -d 'log what the tray does to standard error'
complete -c wirelane-tray -n __fish_use_subcommand -l version -d 'print the version and exit'
complete -c wirelane-tray -n __fish_use_subcommand -l zenity -r -d 'the dialog program for files and credentials'
complete -c wirelane-tray -n __fish_use_subcommand -l help -d 'print the usage and exit'
