# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/install.sh: puts the go command
# and gofmt on PATH when the caller's PATH lost them, as sudo's secure_path
# does ("sudo: go: command not found"). $GO, when set, names the go binary.
# Looks in PATH, /usr/local/go/bin (the go.dev tarball), /usr/lib/go/bin
# (Debian's golang-go), the invoking user's ~/go/bin and ~/sdk/go*/bin,
# then adds `go env GOROOT`/bin for gofmt. Fails with what to install.

find_go() {
	local d home
	if [ -n "${GO:-}" ]; then
		PATH="$(dirname "$GO"):$PATH"
	fi
	if ! command -v go >/dev/null 2>&1; then
		home=
		if [ -n "${SUDO_USER:-}" ]; then home=$(getent passwd "$SUDO_USER" | cut -d: -f6); fi
		for d in /usr/local/go/bin /usr/lib/go/bin ${home:+"$home"/go/bin "$home"/sdk/go*/bin} "$HOME"/go/bin "$HOME"/sdk/go*/bin; do
			if [ -x "$d/go" ]; then
				PATH="$d:$PATH"
				break
			fi
		done
	fi
	if ! command -v go >/dev/null 2>&1; then
		echo "go not found (not on PATH, nor in /usr/local/go/bin or /usr/lib/go/bin)." >&2
		echo "Install Go 1.26 or later from https://go.dev/dl/ into /usr/local/go, or set GO=/path/to/go." >&2
		return 1
	fi
	if ! command -v gofmt >/dev/null 2>&1; then
		PATH="$(go env GOROOT)/bin:$PATH"
	fi
	export PATH
}
