# bash completion for wirelane. Generated from the program's own help
# (internal/tools/clidoc); do not edit.

_wirelane_tunnels() {
	local f
	for f in /etc/wireguard/*.conf /var/run/wireguard/*.sock; do
		[ -e "$f" ] || continue
		f=${f##*/}
		f=${f%.conf}
		printf '%s\n' "${f%.sock}"
	done | sort -u
}

_wirelane() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmdpath='' npos=0 i w skip=0
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [ "$skip" = 1 ]; then skip=0; continue; fi
		case $w in
		--auth-file|--dev|--dns|--duration|--metadata|--mtu|--server-key) skip=1; continue ;;
		-*) continue ;;
		esac
		if [ -z "$cmdpath" ]; then cmdpath=$w
		elif [ "$npos" = 0 ] && case $cmdpath in ovpn) true ;; *) false ;; esac; then cmdpath="$cmdpath $w"
		else npos=$((npos + 1)); fi
	done
	local flags='' valueflags='' first='' words='' tunnels=0 files=''
	case $cmdpath in
	'')
		flags='--help --version -V -h' valueflags='' first='up down strip save reload list show events genkey pubkey genpsk gateway demo ovpn' words='' tunnels=0 files='' ;;
	'up')
		flags='--help' valueflags='' first='' words='' tunnels=1 files='*.conf' ;;
	'down')
		flags='--help' valueflags='' first='' words='' tunnels=1 files='*.conf' ;;
	'strip')
		flags='--help' valueflags='' first='' words='' tunnels=1 files='*.conf' ;;
	'save')
		flags='--force --help' valueflags='' first='' words='' tunnels=1 files='*.conf' ;;
	'reload')
		flags='--dry-run --help' valueflags='' first='' words='' tunnels=1 files='*.conf' ;;
	'list')
		flags='--help --json' valueflags='' first='' words='' tunnels=0 files='' ;;
	'show')
		flags='--help --json' valueflags='' first='' words='all interfaces' tunnels=1 files='' ;;
	'events')
		flags='--help --json' valueflags='' first='' words='' tunnels=0 files='' ;;
	'genkey')
		flags='--help' valueflags='' first='' words='' tunnels=0 files='' ;;
	'pubkey')
		flags='--help' valueflags='' first='' words='' tunnels=0 files='' ;;
	'genpsk')
		flags='--help' valueflags='' first='' words='' tunnels=0 files='' ;;
	'gateway')
		flags='--help' valueflags='' first='check show up down reload' words='' tunnels=0 files='*.toml' ;;
	'demo')
		flags='--duration --help --keep --mtu' valueflags='--duration --mtu' first='' words='' tunnels=0 files='' ;;
	'ovpn')
		flags='--help' valueflags='' first='connect serve genkey' words='' tunnels=0 files='' ;;
	'ovpn connect')
		flags='--auth-file --block-ipv6 --dev --dns --help --mtu --no-routes -v' valueflags='--auth-file --dev --dns --mtu' first='' words='' tunnels=0 files='*' ;;
	'ovpn serve')
		flags='--dev --help -v' valueflags='--dev' first='' words='' tunnels=0 files='*' ;;
	'ovpn genkey')
		flags='--help --metadata --server-key' valueflags='--metadata --server-key' first='' words='' tunnels=0 files='*' ;;
	*) return 0 ;;
	esac
	case " $valueflags " in *" $prev "*)
		if [ -n "$prev" ]; then COMPREPLY=($(compgen -f -- "$cur")); return 0; fi ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return 0
	fi
	if [ "$npos" = 0 ] && [ -n "$first" ]; then
		COMPREPLY=($(compgen -W "$first" -- "$cur"))
		return 0
	fi
	if [ -n "$first" ]; then npos=$((npos - 1)); fi
	[ "$npos" = 0 ] || [ -z "$cmdpath" ] || return 0
	local cands=$words
	if [ "$tunnels" = 1 ]; then cands="$cands $(_wirelane_tunnels)"; fi
	COMPREPLY=($(compgen -W "$cands" -- "$cur"))
	if [ -n "$files" ]; then
		compopt -o filenames 2>/dev/null
		COMPREPLY+=($(compgen -d -- "$cur"))
		if [ "$files" = '*' ]; then COMPREPLY+=($(compgen -f -- "$cur")); else COMPREPLY+=($(compgen -f -X "!$files" -- "$cur")); fi
	fi
	return 0
}

complete -F _wirelane wirelane
