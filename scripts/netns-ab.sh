#!/usr/bin/env bash
# A/B of daemon binaries through network namespaces: one namespace pair per
# binary (daemons and UDP sockets in the root namespace on 127.0.0.1, TUN
# devices moved into the pair, MTU 1420, as in cmd/wirelane-bench), then
# ROUNDS rounds of iperf3 TCP (one stream, SECONDS each) that alternate
# between the binaries. Each run prints the receiver's Gbit/s and the CPU
# seconds both daemons spent per GB carried; the end prints medians and the
# ratios to the first binary. Any daemon with wireguard-go's command line
# works (wirelaned, wireguard-go, and wirelaned built with
# -tags wirelane_refmode for the conventional locked send path).
#
# STREAMS=N in the environment runs N parallel TCP streams (iperf3 -P N);
# with SPLIT=1 as well, N iperf3 client processes (-Z) against N one-off
# servers, as the kernel's WireGuard selftest (netns.sh) runs them, the
# figure being their sum (iperf3 before 3.16 runs -P N on one thread);
# SPLIT=both runs each binary both ways in every round (NAME, NAME+split).
# With PING=N in the environment each run is instead a flood ping of N
# echo requests (ping -f: one in flight, request/response traffic) and
# prints round trips per second and CPU microseconds per round trip; the
# end prints their medians and ratios. SECONDS is then unused.
#
# Usage (root; needs ip, wg, iperf3, python3):
#   scripts/netns-ab.sh ROUNDS SECONDS NAME=BINARY[:FLAGS] NAME=BINARY[:FLAGS] ...
# Example:
#   go build -o /tmp/wirelaned ./cmd/wirelaned
#   go build -tags wirelane_refmode -o /tmp/wirelaned-ref ./cmd/wirelaned
#   go build -o /tmp/wireguard-go golang.zx2c4.com/wireguard
#   scripts/netns-ab.sh 6 8 wireguard-go=/tmp/wireguard-go wirelane=/tmp/wirelaned ref=/tmp/wirelaned-ref
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,28p' "$0" >&2; exit 2; }
ROUNDS=$1
SECS=$2
shift 2
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
for c in ip wg iperf3 python3; do
	command -v "$c" >/dev/null || { echo "needs $c" >&2; exit 1; }
done

work=$(mktemp -d)
PAIR_TAG=${PAIR_TAG:-wlab} PAIR_NET=${PAIR_NET:-10.78} PAIR_PORT=${PAIR_PORT:-42000}
# shellcheck source=lib/netns-pair.sh
. "$(dirname "$0")/lib/netns-pair.sh"
n=0
names=()
cleanup() {
	pair_down "$n"
	rm -rf "$work"
}
trap cleanup EXIT

for spec in "$@"; do
	n=$((n + 1))
	rest=${spec#*=}
	flags=""
	[[ $rest == *:* ]] && flags=${rest#*:}
	names+=("${spec%%=*}")
	pair_up "$n" "${rest%%:*}" "$flags"
done
sleep 0.5

cpu() { # utime+stime ticks of both daemons of pair $1
	awk '{s += $14 + $15} END {print s}' "/proc/$(cat "$work/pid-$1a")/stat" "/proc/$(cat "$work/pid-$1b")/stat"
}
# summary VALUE-HEADER CPU-HEADER DIGITS: medians and ratios of the result
# lines ("round R NAME VALUE UNIT CPU UNIT"), one table row per binary.
summary() {
	python3 - "$work/results" "$1" "$2" "$3" "${names[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
vh, ch, d = sys.argv[2], sys.argv[3], int(sys.argv[4])
names = sys.argv[5:]
g = {n: [float(x[3]) for x in rows if x[2] == n] for n in names}
c = {n: [float(x[5]) for x in rows if x[2] == n] for n in names}
base = names[0]
print()
print(f"| binary | {vh} median (min-max) | x {base} | {ch} median | x {base} |")
print("| --- | --- | --- | --- | --- |")
for n in names:
    print(f"| {n} | {statistics.median(g[n]):.{d}f} ({min(g[n]):.{d}f}-{max(g[n]):.{d}f}) | "
          f"{statistics.median(g[n]) / statistics.median(g[base]):.3f}x | {statistics.median(c[n]):.2f} | "
          f"{statistics.median(c[n]) / statistics.median(c[base]):.3f}x |")
PY
}

if [ -n "${PING:-}" ]; then
	for r in $(seq "$ROUNDS"); do
		for i in $(seq "$n"); do
			c0=$(cpu "$i")
			out=$(ip netns exec "$PAIR_TAG$i-a" ping -f -q -c "$PING" "$PAIR_NET.$i.2")
			c1=$(cpu "$i")
			ms=$(sed -n 's/.* received, .*time \([0-9]*\)ms.*/\1/p' <<<"$out")
			rcvd=$(sed -n 's/.*, \([0-9]*\) received,.*/\1/p' <<<"$out")
			python3 - "$r" "${names[$((i - 1))]}" "$rcvd" "$ms" "$((c1 - c0))" "$(getconf CLK_TCK)" <<'PY' | tee -a "$work/results"
import sys
r, name, rcvd, ms, ticks, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
print(f"round {r} {name} {rcvd / (ms / 1000):.0f} round-trips/s {ticks / hz / rcvd * 1e6:.1f} CPU-us/round-trip")
PY
		done
	done
	summary "round trips/s" "daemon CPU µs per round trip," 0
	exit 0
fi

# iperf_split I: STREAMS iperf3 clients as separate processes, each against
# its own one-off server, as the kernel's selftest (netns.sh) runs its
# parallel streams; one JSON file per stream in $work/run-*.json.
iperf_split() {
	local i=$1 k pids=() cpids=()
	for k in $(seq "$STREAMS"); do
		ip netns exec "$PAIR_TAG$i-b" iperf3 -s -1 -B "$PAIR_NET.$i.2" -p $((PAIR_PORT + 500 + k)) >/dev/null 2>&1 &
		pids+=($!)
	done
	sleep 0.3
	for k in $(seq "$STREAMS"); do
		ip netns exec "$PAIR_TAG$i-a" iperf3 -Z -c "$PAIR_NET.$i.2" -p $((PAIR_PORT + 500 + k)) -t "$SECS" -J >"$work/run-$k.json" &
		cpids+=($!)
	done
	wait "${cpids[@]}" "${pids[@]}"
}

# SPLIT=both: every binary both ways in every round, as NAME (-P) and
# NAME+split; the summary has a row for each.
modes=(p)
[ -n "${SPLIT:-}" ] && modes=(split)
if [ "${SPLIT:-}" = both ]; then
	modes=(p split)
	all=()
	for nm in "${names[@]}"; do all+=("$nm" "$nm+split"); done
	names=("${all[@]}")
fi
for r in $(seq "$ROUNDS"); do
	for i in $(seq "$n"); do
		for mode in "${modes[@]}"; do
			name=${names[$((i - 1))]}
			[ "${SPLIT:-}" = both ] && name=${names[$(((i - 1) * 2))]}
			c0=$(cpu "$i")
			rm -f "$work"/run-*.json
			if [ "$mode" = split ]; then
				iperf_split "$i"
				[ "${SPLIT:-}" = both ] && name=$name+split
			else
				ip netns exec "$PAIR_TAG$i-a" iperf3 -c "$PAIR_NET.$i.2" -t "$SECS" -P "${STREAMS:-1}" -J >"$work/run-1.json"
			fi
			c1=$(cpu "$i")
			python3 - "$r" "$name" "$SECS" "$((c1 - c0))" "$(getconf CLK_TCK)" "$work"/run-*.json <<'PY' | tee -a "$work/results"
import json, sys
r, name, secs, ticks, hz = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
g = sum(json.load(open(p))["end"]["sum_received"]["bits_per_second"] for p in sys.argv[6:]) / 1e9
print(f"round {r} {name} {g:.3f} Gbit/s {ticks / hz / (g * secs / 8):.2f} CPU-s/GB")
PY
		done
	done
done

summary Gbit/s "daemon CPU s/GB" 2
