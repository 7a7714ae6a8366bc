#!/usr/bin/env bash
# Where the CPU goes in a namespace tunnel: iperf3 TCP (one stream, or STREAMS) through
# Wirelane and through wireguard-go, alternated, while `perf record -a`
# samples every CPU. Each sample is put in one bucket (the daemons' crypto,
# the daemons' other user code, the daemons' kernel time, iperf3, idle or
# softirq threads, anything else) and divided by the GB carried, so every
# row reads "CPU seconds per GB of tunnel traffic". Topology as in
# cmd/wirelane-bench: daemons and their UDP sockets in the root namespace on
# 127.0.0.1, TUN devices moved into one namespace pair per engine, MTU 1420.
#
# Usage (root; needs ip, wg, iperf3, perf, python3):
#   scripts/netns-breakdown.sh [ROUNDS] [SECONDS]      (default 3 rounds of 8 s)
#   KEEP=/tmp/bd scripts/netns-breakdown.sh ...        (also keep the samples)
#   STREAMS=4 scripts/netns-breakdown.sh ...           (4 parallel TCP streams)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
SECS="${2:-8}"
HZ=499
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
for c in ip wg iperf3 perf python3; do
	command -v "$c" >/dev/null || { echo "needs $c" >&2; exit 1; }
done
[ "$SECS" -ge 4 ] || { echo "SECONDS must be at least 4" >&2; exit 1; }

work=$(mktemp -d)
PAIR_TAG=${PAIR_TAG:-wlbd} PAIR_NET=${PAIR_NET:-10.79} PAIR_PORT=${PAIR_PORT:-41000}
# shellcheck source=lib/netns-pair.sh
. "$(dirname "$0")/lib/netns-pair.sh"
cleanup() {
	pair_down 2
	# KEEP=DIR keeps the per-sample text (comm, symbol, object) for a closer look.
	if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.txt "$KEEP"/ 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "building wirelaned and wireguard-go" >&2
go build -o "$work/wirelaned" ./cmd/wirelaned
go build -o "$work/wireguard-go" golang.zx2c4.com/wireguard

engines=(wireguard-go wirelaned)
for i in 1 2; do
	pair_up "$i" "$work/${engines[$((i - 1))]}"
done
sleep 0.5

for r in $(seq "$ROUNDS"); do
	for i in 1 2; do
		name=${engines[$((i - 1))]}
		echo "round $r/$ROUNDS: $name" >&2
		(sleep 1; perf record -a -F "$HZ" -o "$work/$name-$r.data" -- sleep $((SECS - 2)) >/dev/null 2>&1) &
		perfpid=$!
		ip netns exec "$PAIR_TAG$i-a" iperf3 -c "$PAIR_NET.$i.2" -t "$SECS" -P "${STREAMS:-1}" -J >"$work/$name-$r.json"
		wait "$perfpid"
		perf script -i "$work/$name-$r.data" -F comm,ip,sym,dso 2>/dev/null >"$work/$name-$r.txt"
	done
done

python3 - "$work" "$ROUNDS" "$SECS" "$HZ" <<'PY'
import json, os, statistics, sys
work, rounds, secs, hz = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
buckets = ["daemon crypto", "daemon other user", "daemon kernel", "iperf3", "idle, softirq", "other"]
res = {}
for name in ["wireguard-go", "wirelaned"]:
    rows = {b: [] for b in buckets}
    rows["Gbit/s"] = []
    for r in range(1, rounds + 1):
        j = json.load(open(f"{work}/{name}-{r}.json"))
        gbps = j["end"]["sum_received"]["bits_per_second"] / 1e9
        gb = gbps * (secs - 2) / 8  # GB carried while perf sampled
        n = dict.fromkeys(buckets, 0)
        for line in open(f"{work}/{name}-{r}.txt"):
            f = line.split(None, 1)
            if not f:
                continue
            comm, rest = f[0], (f[1] if len(f) > 1 else "")
            kernel = "kernel.kallsyms" in rest
            if comm in ("wirelaned", "wireguard-go"):
                if kernel:
                    b = "daemon kernel"
                elif any(k in rest.lower() for k in ("chacha20", "poly1305", "chachapoly", "subtle.xorbytes", "xorbytes")):
                    b = "daemon crypto"
                else:
                    b = "daemon other user"
            elif comm == "iperf3":
                b = "iperf3"
            elif comm == "swapper" or comm.startswith("ksoftirqd"):
                b = "idle, softirq"
            else:
                b = "other"
            n[b] += 1
        for b in buckets:
            rows[b].append(n[b] / hz / gb)
        rows["Gbit/s"].append(gbps)
    res[name] = rows
streams = os.environ.get("STREAMS", "1")
print(f"netns TCP, {streams} stream(s), MTU 1420, {rounds} rounds of {secs:.0f} s, perf at {hz:.0f} Hz on every CPU; medians")
print()
print("| bucket (CPU s per GB) | wireguard-go | Wirelane |")
print("| --- | ---: | ---: |")
for b in ["Gbit/s"] + buckets:
    print(f"| {b} | {statistics.median(res['wireguard-go'][b]):.2f} | {statistics.median(res['wirelaned'][b]):.2f} |")
PY
