# bash completion for wirelane-tray. Generated from the program's own help
# (internal/tools/clidoc); do not edit.

_wirelane_tray_tunnels() {
	local f
	for f in /etc/wireguard/*.conf /var/run/wireguard/*.sock; do
		[ -e "$f" ] || continue
		f=${f##*/}
		f=${f%.conf}
		printf '%s\n' "${f%.sock}"
	done | sort -u
}

_wirelane_tray() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmdpath='' npos=0 i w skip=0
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [ "$skip" = 1 ]; then skip=0; continue; fi
		case $w in
		--group|--socket|--zenity) skip=1; continue ;;
		-*) continue ;;
		esac
		if [ -z "$cmdpath" ]; then cmdpath=$w
		else npos=$((npos + 1)); fi
	done
	local flags='' valueflags='' first='' words='' tunnels=0 files=''
	case $cmdpath in
	'')
		flags='--autostart --group --help --socket --verbose --version --zenity' valueflags='--group --socket --zenity' first='' words='' tunnels=0 files='' ;;
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
	if [ "$tunnels" = 1 ]; then cands="$cands $(_wirelane_tray_tunnels)"; fi
	COMPREPLY=($(compgen -W "$cands" -- "$cur"))
	if [ -n "$files" ]; then
		compopt -o filenames 2>/dev/null
		COMPREPLY+=($(compgen -d -- "$cur"))
		if [ "$files" = '*' ]; then COMPREPLY+=($(compgen -f -- "$cur")); else COMPREPLY+=($(compgen -f -X "!$files" -- "$cur")); fi
	fi
	return 0
}

complete -F _wirelane_tray wirelane-tray
