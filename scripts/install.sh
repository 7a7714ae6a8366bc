#!/usr/bin/env bash
# Builds Wirelane and installs it (run as root, or with DESTDIR as anyone):
#
#   sudo ./scripts/install.sh              build and install
#   sudo ./scripts/install.sh --uninstall  remove what install put there
#
#   $PREFIX/bin/wirelane, wirelaned, wirelane-tray    the binaries
#   $UNITDIR/wirelane@.service, wirelane-gateway@.service,
#     wirelane-ovpn@.service, wirelaned.service, wirelane.target
#   $PREFIX/share/man/man8/wirelane.8, wirelaned.8
#   $PREFIX/share/man/man1/wirelane-tray.1
#   $PREFIX/share/bash-completion/completions/wirelane, wirelaned, wirelane-tray
#   $PREFIX/share/zsh/site-functions/_wirelane, _wirelaned, _wirelane-tray
#   $PREFIX/share/fish/vendor_completions.d/wirelane.fish, wirelaned.fish,
#     wirelane-tray.fish
#   $PREFIX/share/applications/wirelane-tray.desktop   the tray's menu entry
#   $SYSCONFDIR/xdg/autostart/wirelane-tray.desktop    the tray at login
#     (it starts only for root and members of the wirelane group)
#
# PREFIX defaults to /usr/local, UNITDIR to $PREFIX/lib/systemd/system and
# SYSCONFDIR to /etc (places systemd, man, bash-completion, zsh, fish and
# the desktops search).
# DESTDIR=DIR puts everything under DIR instead of / (for packaging and the
# tests); the units and desktop entries still name $PREFIX/bin. The go
# command is found even when sudo's secure_path hid it
# (scripts/lib/find-go.sh; GO=/path/to/go chooses one). Needs Go 1.26 or
# later and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX="${PREFIX:-/usr/local}"
UNITDIR="${UNITDIR:-$PREFIX/lib/systemd/system}"
SYSCONFDIR="${SYSCONFDIR:-/etc}"
APPDIR="$PREFIX/share/applications"
AUTOSTARTDIR="$SYSCONFDIR/xdg/autostart"
DESTDIR="${DESTDIR:-}"
BINDIR="$PREFIX/bin"
MANDIR="$PREFIX/share/man/man8"
MAN1DIR="$PREFIX/share/man/man1"
BASHDIR="$PREFIX/share/bash-completion/completions"
ZSHDIR="$PREFIX/share/zsh/site-functions"
FISHDIR="$PREFIX/share/fish/vendor_completions.d"

units=(wirelane@.service wirelane-gateway@.service wirelane-fleet@.service wirelane-ovpn@.service wirelaned.service wirelane.target)

# installed lists every file install.sh puts in place, as SOURCE DEST.
installed() {
	local u p
	echo "- $BINDIR/wirelane"
	echo "- $BINDIR/wirelaned"
	echo "- $BINDIR/wirelane-tray"
	for u in "${units[@]}"; do echo "packaging/systemd/$u $UNITDIR/$u"; done
	echo "packaging/man/wirelane.8 $MANDIR/wirelane.8"
	echo "packaging/man/wirelaned.8 $MANDIR/wirelaned.8"
	echo "packaging/man/wirelane-tray.1 $MAN1DIR/wirelane-tray.1"
	for p in wirelane wirelaned wirelane-tray; do
		echo "packaging/completions/$p.bash $BASHDIR/$p"
		echo "packaging/completions/_$p $ZSHDIR/_$p"
		echo "packaging/completions/$p.fish $FISHDIR/$p.fish"
	done
	echo "packaging/desktop/wirelane-tray.desktop $APPDIR/wirelane-tray.desktop"
	echo "packaging/desktop/wirelane-tray-autostart.desktop $AUTOSTARTDIR/wirelane-tray.desktop"
}

# reload tells a running systemd about changed units (not under DESTDIR).
reload() {
	if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		systemctl daemon-reload || true
	fi
}

case "${1:-}" in
--uninstall)
	installed | while read -r _ dest; do
		if [ -e "$DESTDIR$dest" ]; then
			rm -f "$DESTDIR$dest"
			echo "removed $DESTDIR$dest"
		fi
	done
	reload
	exit 0
	;;
"") ;;
-h | --help)
	sed -n '2,25p' "$0"
	exit 0
	;;
*)
	echo "install.sh: unknown argument $1 (want nothing or --uninstall)" >&2
	exit 2
	;;
esac

if [ -z "$DESTDIR" ] && [ "$(id -u)" != 0 ]; then
	echo "install.sh: installing into $PREFIX needs root: sudo $0 (or DESTDIR=DIR $0)" >&2
	exit 1
fi

# shellcheck source=lib/find-go.sh
. scripts/lib/find-go.sh
find_go

# The version and revision from git, for checkouts the go command does not
# stamp itself (git worktrees, a checkout owned by another user under sudo).
ldflags=()
vcs=-buildvcs=auto
if git rev-parse HEAD >/dev/null 2>&1; then
	pkg=github.com/wirelane/wirelane/internal/sys/buildinfo
	x="-X $pkg.Revision=$(git rev-parse HEAD)"
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		x="$x -X $pkg.Modified=true"
	fi
	if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
		x="$x -X $pkg.Version=$v"
	fi
	ldflags=(-ldflags "$x")
else
	vcs=-buildvcs=false
fi

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
echo "== building wirelane, wirelaned and wirelane-tray with $(go version)"
go build "$vcs" -trimpath "${ldflags[@]}" -o "$build/" ./cmd/wirelane ./cmd/wirelaned ./cmd/wirelane-tray

echo "== installing into ${DESTDIR:-/}"
installed | while read -r src dest; do
	if [ "$src" = - ]; then
		src="$build/$(basename "$dest")"
		mode=0755
	else
		mode=0644
	fi
	install -d "$DESTDIR$(dirname "$dest")"
	case $dest in
	"$UNITDIR"/* | "$APPDIR"/* | "$AUTOSTARTDIR"/*)
		# The units and desktop entries name the binaries where they are
		# installed.
		sed "s|/usr/local/bin/|$BINDIR/|g" "$src" >"$build/unit"
		install -m "$mode" "$build/unit" "$DESTDIR$dest"
		;;
	*) install -m "$mode" "$src" "$DESTDIR$dest" ;;
	esac
	echo "   $DESTDIR$dest"
done
reload
"$DESTDIR$BINDIR/wirelane" --version
echo "== done: try 'wirelane list', 'man wirelane', or 'systemctl enable --now wirelane@wg0'"
