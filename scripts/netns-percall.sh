#!/usr/bin/env bash
# Where one daemon pair's CPU goes per TCP segment, by system call: one
# tunnel (daemons and UDP sockets in the root namespace on 127.0.0.1, TUN
# devices in a namespace pair, MTU 1420, as in cmd/wirelane-bench), one
# iperf3 TCP stream (or STREAMS) for SECONDS, `perf record -a -g` over all
# but the first and last second. Each sample goes in one bucket: the
# daemons' Go code (crypto, runtime, the rest), the daemons' kernel time by
# the system call in its chain (TUN read, TUN write, sendmmsg, recvmmsg,
# poll, scheduling; "other" is mostly softirq taken in the daemons'
# context), iperf3, idle, anything else (other users of the machine). The
# figures are CPU nanoseconds per TCP segment (1368 bytes of payload),
# the per-packet costs of internal/sys/procs' model
# (docs/benchmarks-method.md, "Threads and inline crypto").
#
# Usage (root; needs ip, wg, iperf3, perf, python3):
#   scripts/netns-percall.sh BINARY [SECONDS]     (default 6)
#   BINARY may be a wrapper: printf '#!/bin/sh\nGOMAXPROCS=2 exec /tmp/wirelaned "$@"\n'
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
BIN=$1
SECS=${2:-6}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
for c in ip wg iperf3 perf python3; do
	command -v "$c" >/dev/null || { echo "needs $c" >&2; exit 1; }
done
[ "$SECS" -ge 4 ] || { echo "SECONDS must be at least 4" >&2; exit 1; }

work=$(mktemp -d)
PAIR_TAG=${PAIR_TAG:-wlpc} PAIR_NET=${PAIR_NET:-10.77} PAIR_PORT=${PAIR_PORT:-41500}
# shellcheck source=lib/netns-pair.sh
. "$(dirname "$0")/lib/netns-pair.sh"
cleanup() {
	pair_down 1
	rm -rf "$work"
}
trap cleanup EXIT

pair_up 1 "$BIN"
sleep 0.5
(sleep 1; perf record -a -g -F 499 -o "$work/perf.data" -- sleep $((SECS - 2)) >/dev/null 2>&1) &
perfpid=$!
ip netns exec "${PAIR_TAG}1-a" iperf3 -c "$PAIR_NET.1.2" -t "$SECS" -P "${STREAMS:-1}" -J >"$work/iperf.json"
wait "$perfpid"
perf script -i "$work/perf.data" -F comm,pid,tid,ip,sym 2>/dev/null >"$work/perf.txt"

python3 - "$work" "$((SECS - 2))" "$(cat "$work/pid-1a")" "$(cat "$work/pid-1b")" <<'PY'
import collections, json, sys
work, win, pids = sys.argv[1], float(sys.argv[2]), set(sys.argv[3:5])
hz = 499.0
bps = json.load(open(f"{work}/iperf.json"))["end"]["sum_received"]["bits_per_second"]
segs = bps / 8 / 1368 * win
calls = (("tun_chr_read_iter", "TUN read"), ("tun_get_user", "TUN write"), ("tun_chr_write_iter", "TUN write"),
         ("sendmmsg", "sendmmsg"), ("recvmmsg", "recvmmsg"), ("sendmsg", "sendmsg"), ("recvmsg", "recvmsg"),
         ("do_sys_poll", "poll"), ("epoll", "poll"), ("futex", "scheduling"), ("schedule", "scheduling"),
         ("nanosleep", "scheduling"))
def bucket(comm, pid, chain):
    kernel = bool(chain) and chain[0][0].startswith("ffffffff")
    if pid in pids:
        if not kernel:
            leaf = chain[0][1].lower() if chain else ""
            if any(k in leaf for k in ("chacha", "poly1305", "xorbytes")):
                return "daemons, Go: crypto"
            if "runtime." in leaf:
                return "daemons, Go: runtime"
            return "daemons, Go: the rest"
        syms = " ".join(s for _, s in chain)
        for key, name in calls:
            if key in syms:
                return "daemons, kernel: " + name
        return "daemons, kernel: other (softirq)"
    if comm == "iperf3":
        return "iperf3"
    if comm == "swapper":
        return "idle"
    return "anything else"
n = collections.Counter()
comm = pid = None
chain = []
for line in list(open(f"{work}/perf.txt")) + ["\n"]:
    s = line.rstrip("\n")
    if not s.strip():
        if comm is not None:
            n[bucket(comm, pid, chain)] += 1
        comm, chain = None, []
    elif s[0] not in " \t":
        f = s.split()
        comm, pid, chain = f[0], f[1].split("/")[0], []
    else:
        f = s.split(None, 1)
        chain.append((f[0], f[1] if len(f) > 1 else ""))
print(f"{bps / 1e9:.2f} Gbit/s; CPU ns per TCP segment, {n.total()} samples at {hz:.0f} Hz over {win:.0f} s")
print()
print("| bucket | CPU ns per segment |")
print("| --- | ---: |")
for k in sorted(n):
    print(f"| {k} | {n[k] / hz / segs * 1e9:.0f} |")
d = sum(v for k, v in n.items() if k.startswith("daemons"))
rest = n["iperf3"] + n["idle"]
if d + rest:
    print(f"\nthe daemons' share of the tunnel's CPU (without 'anything else'): {d / (d + rest):.2f}, each {d / (d + rest) / 2:.2f}")
PY
