#!/usr/bin/env bash
# The project's test command (README.md, .ci/run): installs what the tests
# need when run as root, checks formatting and vet, runs every test (the
# root-only end-to-end tests included when run as root), the race detector on
# the concurrent packages, and a short run of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-3s}"

# sudo's secure_path drops /usr/local/go/bin: find go and gofmt anyway.
# shellcheck source=lib/find-go.sh
. scripts/lib/find-go.sh
find_go

if [ "$(id -u)" = 0 ]; then
	need=()
	for p in wg:wireguard-tools iperf3:iperf3 ping:iputils-ping ncat:ncat openvpn:openvpn ip:iproute2 iptables:iptables nft:nftables openssl:openssl systemd-analyze:systemd man:man-db groff:groff-base zsh:zsh fish:fish sudo:sudo promtool:prometheus resolvectl:systemd-resolved dbus-daemon:dbus-daemon unshare:util-linux Xvfb:xvfb xfce4-panel:xfce4-panel xdotool:xdotool etcd:etcd-server etcdctl:etcd-client; do
		command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
	done
	# The race detector needs cgo: a C compiler and the C library's headers
	# and start files, which a minimal Debian lacks.
	command -v gcc >/dev/null 2>&1 || need+=(gcc)
	dpkg -s libc6-dev >/dev/null 2>&1 || need+=(libc6-dev)
	if [ "${#need[@]}" -gt 0 ]; then
		echo "== installing ${need[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		# systemd-resolved's package points /etc/resolv.conf at its stub
		# file, which without a running resolved (no systemd as PID 1, as
		# in containers) holds nothing: then no name resolves, the Go
		# module proxy's included. Keep the host's file to put it back.
		resolv_saved=""
		if [[ " ${need[*]} " == *" systemd-resolved "* ]] && [ -e /etc/resolv.conf ]; then
			resolv_saved=$(mktemp)
			cp -L /etc/resolv.conf "$resolv_saved"
		fi
		apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
		if [ -n "$resolv_saved" ]; then
			if ! systemctl is-active -q systemd-resolved 2>/dev/null && ! cmp -s "$resolv_saved" /etc/resolv.conf 2>/dev/null; then
				echo "== systemd-resolved is not running: restoring /etc/resolv.conf"
				rm -f /etc/resolv.conf
				install -m 0644 "$resolv_saved" /etc/resolv.conf
			fi
			rm -f "$resolv_saved"
		fi
	fi
else
	echo "== not root: end-to-end tests that need root or /dev/net/tun will skip"
fi

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt needed:"; echo "$bad"; exit 1; fi

echo "== go vet"
go vet ./...
# The pure-Go build of the AEAD (other CPUs and -tags purego) must stay
# buildable and correct even on a machine whose CPU runs the AVX-512 kernels.
go vet -tags purego ./internal/crypto/chachapoly
go test -count=1 -tags purego ./internal/crypto/chachapoly
# WIRELANE_TEST_UNTIL=setup stops here: what is needed is installed and
# everything builds (scripts/fresh-check.sh uses it for its quick check).
if [ "${WIRELANE_TEST_UNTIL:-}" = setup ]; then
	echo "== stopping after the set-up stage (WIRELANE_TEST_UNTIL=setup)"
	exit 0
fi

# Every unit test runs under the race detector. The end-to-end tests drive
# separately built daemons (the detector would see nothing there) and the
# benchmark smoke test measures speed, so those two run without it.
plain='/internal/testkit/e2e$|/internal/tools/bench$|/cmd/wirelane-bench$'
echo "== go test -race (unit tests)"
go test -race -count=1 -timeout 20m $(go list ./... | grep -Ev "$plain")

echo "== go test (end-to-end and benchmark smoke)"
go test -count=1 -timeout 20m $(go list ./... | grep -E "$plain")

# Latency requirements of the protocol, asserted only without the race
# detector (which slows everything): a legitimate handshake under a
# handshake flood in under 500 ms (docs/security.md).
echo "== go test (latency bounds, without the race detector)"
go test -count=1 -run 'TestHandshakeUnderFlood' ./device

# fuzz_one runs one fuzz target. A failure that left a failing input is a
# real one. Go's fuzzing coordinator can also report "context deadline
# exceeded" when its time runs out while a worker is busy on a loaded
# machine, with no input to show: that is retried once, then reported as a
# warning, since there is nothing to reproduce.
fuzz_one() {
	local pkg=$1 f=$2 try
	for try in 1 2; do
		if go test -run '^$' -fuzz "^${f}\$" -fuzztime "$FUZZTIME" "$pkg" >/tmp/fuzz.$$ 2>&1; then
			return 0
		fi
		if grep -q 'Failing input written' /tmp/fuzz.$$ || ! grep -q 'context deadline exceeded' /tmp/fuzz.$$; then
			cat /tmp/fuzz.$$
			exit 1
		fi
		echo "   (fuzzing coordinator timed out with no failing input; try $try)"
	done
	echo "   warning: $f: coordinator timed out twice with no failing input"
}

echo "== fuzz ($FUZZTIME each)"
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	# FuzzAcceptanceUAPIAgainstReference compares our UAPI answers with
	# wireguard-go's: its corpus runs with the unit tests, and its open-ended
	# search for new differences is run by hand, not on every CI run.
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | grep -v '^FuzzAcceptanceUAPIAgainstReference$' | sort -u); do
		echo "-- $pkg $f"
		fuzz_one "$pkg" "$f"
	done
done
rm -f /tmp/fuzz.$$
echo "== all tests passed"
