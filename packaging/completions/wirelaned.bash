# bash completion for wirelaned. Generated from the program's own help
# (internal/tools/clidoc); do not edit.

_wirelaned_tunnels() {
	local f
	for f in /etc/wireguard/*.conf /var/run/wireguard/*.sock; do
		[ -e "$f" ] || continue
		f=${f##*/}
		f=${f%.conf}
		printf '%s\n' "${f%.sock}"
	done | sort -u
}

_wirelaned() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmdpath='' npos=0 i w skip=0
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [ "$skip" = 1 ]; then skip=0; continue; fi
		case $w in
		--log-file) skip=1; continue ;;
		-*) continue ;;
		esac
		if [ -z "$cmdpath" ]; then cmdpath=$w
		else npos=$((npos + 1)); fi
	done
	local flags='' valueflags='' first='' words='' tunnels=0 files=''
	case $cmdpath in
	'')
		flags='--foreground --help --log-file --version -f -h' valueflags='--log-file' first='' words='' tunnels=1 files='' ;;
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
	if [ "$tunnels" = 1 ]; then cands="$cands $(_wirelaned_tunnels)"; fi
	COMPREPLY=($(compgen -W "$cands" -- "$cur"))
	if [ -n "$files" ]; then
		compopt -o filenames 2>/dev/null
		COMPREPLY+=($(compgen -d -- "$cur"))
		if [ "$files" = '*' ]; then COMPREPLY+=($(compgen -f -- "$cur")); else COMPREPLY+=($(compgen -f -X "!$files" -- "$cur")); fi
	fi
	return 0
}

complete -F _wirelaned wirelaned
