# shellcheck shell=bash
# Sourced by scripts/netns-ab.sh and scripts/netns-breakdown.sh: the
# namespace topology of cmd/wirelane-bench for daemon binaries with
# wireguard-go's command line. Needs $work (a scratch directory), $PAIR_TAG
# (name prefix), $PAIR_NET (first two octets) and $PAIR_PORT (port base).
#
#   pair_up I BINARY [FLAGS]
#       tunnel I: daemons ${PAIR_TAG}Ia and ${PAIR_TAG}Ib in the root
#       namespace (UDP on 127.0.0.1), their TUN devices moved into the
#       namespaces ${PAIR_TAG}I-a and ${PAIR_TAG}I-b as $PAIR_NET.I.1 and
#       .2 (MTU 1420), an iperf3 server on .2; the daemons' pids in
#       $work/pid-Ia and $work/pid-Ib
#   pair_down N
#       removes tunnels 1 to N and their daemons

pair_up() {
	local i=$1 bin=$2 flags=${3:-} s o pa pb
	for s in a b; do
		ip netns add "$PAIR_TAG$i-$s"
		ip -n "$PAIR_TAG$i-$s" link set lo up
		# shellcheck disable=SC2086
		LOG_LEVEL=error "$bin" -f $flags "$PAIR_TAG$i$s" >"$work/daemon-$i$s.log" 2>&1 &
		echo $! >"$work/pid-$i$s"
	done
	for s in a b; do
		# Up to 20 s, for a loaded machine (5 s was once too short); a
		# daemon that never comes up is reported with its log.
		for _ in $(seq 400); do wg show "$PAIR_TAG$i$s" >/dev/null 2>&1 && break; sleep 0.05; done
		wg show "$PAIR_TAG$i$s" >/dev/null 2>&1 || {
			echo "daemon for $PAIR_TAG$i$s ($bin) did not come up; its log:" >&2
			cat "$work/daemon-$i$s.log" >&2
			return 1
		}
		wg genkey >"$work/key-$i$s"
	done
	pa=$((PAIR_PORT + i * 2)); pb=$((pa + 1))
	wg set "$PAIR_TAG${i}a" private-key "$work/key-${i}a" listen-port "$pa" \
		peer "$(wg pubkey <"$work/key-${i}b")" endpoint "127.0.0.1:$pb" allowed-ips "$PAIR_NET.$i.2/32"
	wg set "$PAIR_TAG${i}b" private-key "$work/key-${i}b" listen-port "$pb" \
		peer "$(wg pubkey <"$work/key-${i}a")" endpoint "127.0.0.1:$pa" allowed-ips "$PAIR_NET.$i.1/32"
	for s in a b; do
		o=1; [ "$s" = b ] && o=2
		ip link set "$PAIR_TAG$i$s" netns "$PAIR_TAG$i-$s"
		ip -n "$PAIR_TAG$i-$s" addr add "$PAIR_NET.$i.$o/24" dev "$PAIR_TAG$i$s"
		ip -n "$PAIR_TAG$i-$s" link set "$PAIR_TAG$i$s" mtu 1420 up
	done
	ip netns exec "$PAIR_TAG$i-a" ping -c1 -W2 "$PAIR_NET.$i.2" >/dev/null
	ip netns exec "$PAIR_TAG$i-b" iperf3 -s -D -B "$PAIR_NET.$i.2"
}

pair_down() {
	local i s
	for i in $(seq "$1"); do
		for s in a b; do
			ip netns pids "$PAIR_TAG$i-$s" 2>/dev/null | xargs -r kill 2>/dev/null || true
			ip netns del "$PAIR_TAG$i-$s" 2>/dev/null || true
			[ -f "$work/pid-$i$s" ] && kill "$(cat "$work/pid-$i$s")" 2>/dev/null || true
		done
	done
}
