#!/usr/bin/env bash
# Runs README.md's set-up commands, as written, on a fresh Debian system:
# a minimal bookworm made with debootstrap in a folder of its own, entered
# with chroot in a private mount namespace (nothing of it stays mounted).
#
#   sudo ./scripts/fresh-check.sh          the quick check (what CI runs)
#   sudo ./scripts/fresh-check.sh --full   also the whole test command,
#                                          as root and through sudo (long)
#
# Inside, as root: the README's prerequisites line (apt-get install sudo
# git ca-certificates curl), Go, a clone of this checkout, command 1 (the
# demo), the install command and `wirelane --version`; then as a user
# with sudo rights, in their own clone: command 1 and command 2 (the test
# command) through sudo. The quick check stops command 2 after its set-up
# stage (WIRELANE_TEST_UNTIL=setup: go found through sudo's secure_path,
# every package it needs installed, gofmt, vet); --full runs it to the end,
# once as root and once through sudo.
#
# The one deviation from the README: the Go tarball comes from this
# machine's Go (GOROOT packed up), not from go.dev, which CI machines
# cannot reach; it is unpacked with the same tar command.
#
# FRESH_ROOT=DIR keeps the system in DIR (default: a temporary folder,
# removed at the end); MIRROR= picks the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

full=0
case "${1:-}" in
--full) full=1 ;;
"") ;;
-h | --help)
	sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "fresh-check.sh: unknown argument $1 (try --help)" >&2
	exit 2
	;;
esac
if [ "$(id -u)" != 0 ]; then
	echo "fresh-check.sh: needs root (debootstrap, chroot, network namespaces)" >&2
	exit 1
fi

# shellcheck source=lib/find-go.sh
. scripts/lib/find-go.sh
find_go
goroot=$(go env GOROOT)

if ! command -v debootstrap >/dev/null; then
	echo "== installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
fi

root="${FRESH_ROOT:-}"
keep=1
if [ -z "$root" ]; then
	root=$(mktemp -d /var/tmp/wirelane-fresh.XXXXXX)
	chmod 0755 "$root"
	keep=0
fi
cleanup() {
	if [ "$keep" = 0 ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

mirror="${MIRROR:-http://deb.debian.org/debian}"
if [ ! -x "$root/bin/bash" ]; then
	echo "== debootstrap bookworm (minbase) into $root"
	start=$SECONDS
	# The mirror sometimes fails a download under load: three tries.
	for try in 1 2 3; do
		if debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1; then
			break
		fi
		if [ "$try" = 3 ]; then
			tail -20 "$root.debootstrap.log"
			if grep -q "Couldn't download\|Failed getting release file\|Temporary failure resolving" "$root.debootstrap.log" && [ "${FRESH_NETWORK_STRICT:-0}" != 1 ]; then
				echo "== fresh-check NOT RUN: the Debian mirror could not be reached three times (a network problem, not the project's); FRESH_NETWORK_STRICT=1 makes this an error"
				rm -f "$root.debootstrap.log"
				exit 0
			fi
			exit 1
		fi
		echo "   debootstrap failed (try $try); again"
		find "$root" -mindepth 1 -maxdepth 1 -exec rm -rf --one-file-system {} +
		sleep 5
	done
	rm -f "$root.debootstrap.log"
	echo "   $((SECONDS - start)) s"
fi

echo "== packing this machine's Go ($goroot) as the README's tarball"
mkdir -p "$root/tmp/fresh"
tar -C "$(dirname "$goroot")" -czf "$root/tmp/fresh/go.tar.gz" "$(basename "$goroot")"
git -C "$src" bundle create -q "$root/tmp/fresh/wirelane.bundle" HEAD 2>/dev/null ||
	git -C "$src" bundle create "$root/tmp/fresh/wirelane.bundle" HEAD
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
echo "127.0.1.1 $(hostname)" >>"$root/etc/hosts"
# Local certificate authorities (a TLS-inspecting proxy's, as on CI
# machines) go where Debian's ca-certificates adds them to the bundle.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	mkdir -p "$root/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
cat >"$root/tmp/fresh/inner.sh" <<'INNER'
set -euo pipefail
full=$1
export HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive
step() { echo "== [fresh] ($SECONDS s) $*"; }

step "README: apt-get update && apt-get install -y sudo git ca-certificates curl"
apt-get update -qq && apt-get install -y -qq sudo git ca-certificates curl >/dev/null
step "README: Go (from the packed tarball, with the README's tar command)"
tar -C /usr/local -xz </tmp/fresh/go.tar.gz
export PATH="$PATH:/usr/local/go/bin"
go version

rm -rf /root/wirelane
git -c advice.detachedHead=false clone -q /tmp/fresh/wirelane.bundle /root/wirelane
cd /root/wirelane
step "README command 1 as root: sudo env \"PATH=\$PATH\" go run ./cmd/wirelane demo"
sudo env "PATH=$PATH" go run ./cmd/wirelane demo
step "README: sudo ./scripts/install.sh && wirelane --version"
sudo ./scripts/install.sh >/dev/null
wirelane --version
wirelaned --version
if [ "$full" = 1 ]; then
	step "README command 2 as root: sudo ./scripts/test.sh"
	sudo ./scripts/test.sh
fi

step "a user with sudo rights, in their own clone"
id dev >/dev/null 2>&1 && userdel -r dev 2>/dev/null
useradd -m -s /bin/bash dev
echo 'dev ALL=(ALL) NOPASSWD: ALL' >/etc/sudoers.d/dev
chmod 0440 /etc/sudoers.d/dev
until=setup
[ "$full" = 1 ] && until=
su - dev -c "set -euo pipefail
export PATH=\"\$PATH:/usr/local/go/bin\"
git -c advice.detachedHead=false clone -q /tmp/fresh/wirelane.bundle wirelane && cd wirelane
echo '== [fresh] README command 1 through sudo'
sudo env \"PATH=\$PATH\" go run ./cmd/wirelane demo
echo '== [fresh] README command 2 through sudo${until:+ (to the end of its set-up stage)}'
sudo ${until:+WIRELANE_TEST_UNTIL=$until} ./scripts/test.sh
"
step "all README commands worked"
INNER

echo "== entering the fresh system"
unshare --mount --propagation private bash -c '
set -e
root=$1
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
mkdir -p "$root/run/netns"
exec chroot "$root" /bin/bash /tmp/fresh/inner.sh "$2"
' fresh "$root" "$full"
echo "== fresh-check passed"
