#!/bin/bash
# Alternated A/B of two Wirelane binaries' OpenVPN client and server against
# OpenVPN 2.6, all three tunnels up at once between the same two network
# namespaces (the ovpnbed topology: AES-256-GCM, Wirelane's TUN MTU 1400,
# OpenVPN without DCO), over one transport.
#
#   sudo PROTO=udp REPEATS=5 CASES="ping up down" scripts/ovpn-ab.sh /tmp/wl-A /tmp/wl-B
#
# Each repeat runs every case on A, B and OpenVPN (O), rotating which goes
# first: ping -f -q -w DUR (round trips/s), iperf3 -t DUR up and -R down
# (Mbit/s). For each run it prints the CPU of the tunnel's server and client
# processes (utime+stime from /proc/PID/stat) per round trip (µs) or per GB
# (s). PERFSTAT=1 adds each engine's system calls and context switches per
# round trip (perf stat, one more flood ping each). PROFILE=DIR additionally records `perf record -g` of A's and B's
# processes during one extra flood ping each (DIR/{A,B}.perf.data).
# Namespaces, links and ports carry the name NAME (default ovab).
set -euo pipefail
A=${1:?wirelane binary A}
B=${2:?wirelane binary B}
PROTO=${PROTO:-udp}
REPEATS=${REPEATS:-5}
DUR=${DUR:-3}
CASES=${CASES:-ping up down}
NAME=${NAME:-ovab}
PROFILE=${PROFILE:-}
SNS=$NAME-s CNS=$NAME-c
W=$(mktemp -d /tmp/$NAME.XXXXXX)
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.5
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	ip netns del "$SNS" 2>/dev/null || true
	ip netns del "$CNS" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT

cd "$W"
openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
openssl req -x509 -new -key ca.key -subj /CN=ab-ca -days 1 -out ca.crt \
	-addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign 2>/dev/null
for who in server client; do
	eku=serverAuth
	[ $who = client ] && eku=clientAuth
	openssl ecparam -name prime256v1 -genkey -noout -out $who.key 2>/dev/null
	openssl req -new -key $who.key -subj /CN=$who -out $who.csr 2>/dev/null
	printf 'keyUsage=digitalSignature,keyAgreement\nextendedKeyUsage=%s\n' $eku >$who.ext
	openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile $who.ext -out $who.crt 2>/dev/null
done
inline="<ca>
$(cat ca.crt)
</ca>
<cert>
$(cat client.crt)
</cert>
<key>
$(cat client.key)
</key>"
creds="ca ca.crt
cert server.crt
key server.key
dh none
data-ciphers AES-256-GCM
keepalive 10 60"
# Tunnel i: port 1290+i, subnet 10.9i.0.0/24.
for i in 1 2; do
	printf 'port %d\nproto %s4\ndev %ss%d\ntun-mtu 1400\ntopology subnet\nserver 10.9%d.0.0 255.255.255.0\n%s\n' \
		$((1290 + i)) "$PROTO" "$NAME" $i $i "$creds" >wl$i-server.conf
	printf 'client\ndev tun\nremote 192.168.97.1 %d %s\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n%s\n' \
		$((1290 + i)) "$PROTO" "$inline" >wl$i-client.ovpn
done
ovproto=${PROTO}4
[ "$PROTO" = tcp ] && ovproto=tcp4-server
printf 'port 1293\nproto %s\nlocal 192.168.97.1\ndev %sso\ndev-type tun\ntopology subnet\nserver 10.93.0.0 255.255.255.0\ndisable-dco\nverb 1\n%s\n' \
	"$ovproto" "$NAME" "$creds" >ov-server.conf
printf 'client\ndev %sco\ndev-type tun\nremote 192.168.97.1 1293 %s4\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\ndisable-dco\nverb 1\n%s\n' \
	"$NAME" "$PROTO" "$inline" >ov-client.ovpn

ip netns add "$SNS"
ip netns add "$CNS"
ip -n "$SNS" link set lo up
ip -n "$CNS" link set lo up
ip link add "$NAME-vs" netns "$SNS" type veth peer name "$NAME-vc" netns "$CNS"
ip -n "$SNS" addr add 192.168.97.1/24 dev "$NAME-vs"
ip -n "$CNS" addr add 192.168.97.2/24 dev "$NAME-vc"
ip -n "$SNS" link set "$NAME-vs" up
ip -n "$CNS" link set "$NAME-vc" up

start() { # ns log cmd...: starts cmd in ns, sets STARTED to its pid
	local ns=$1 log=$2
	shift 2
	env WIRELANE_SOCKET=off ip netns exec "$ns" "$@" >"$log" 2>&1 &
	STARTED=$!
	PIDS+=("$STARTED")
}
declare -A SRV CLI ADDR
start "$SNS" wl1-server.log "$A" ovpn serve wl1-server.conf
SRV[A]=$STARTED
start "$SNS" wl2-server.log "$B" ovpn serve wl2-server.conf
SRV[B]=$STARTED
start "$SNS" ov-server.log openvpn --cd "$W" --config ov-server.conf
SRV[O]=$STARTED
sleep 0.5
start "$CNS" wl1-client.log "$A" ovpn connect --dev "${NAME}c1" --mtu 1400 --dns off wl1-client.ovpn
CLI[A]=$STARTED
start "$CNS" wl2-client.log "$B" ovpn connect --dev "${NAME}c2" --mtu 1400 --dns off wl2-client.ovpn
CLI[B]=$STARTED
start "$CNS" ov-client.log openvpn --cd "$W" --config ov-client.ovpn
CLI[O]=$STARTED
ADDR[A]=10.91.0.1 ADDR[B]=10.92.0.1 ADDR[O]=10.93.0.1
for e in A B O; do
	for _ in $(seq 150); do
		ip netns exec "$CNS" ping -c 1 -W 1 "${ADDR[$e]}" >/dev/null 2>&1 && break
		sleep 0.2
	done
	ip netns exec "$CNS" ping -c 1 -W 1 "${ADDR[$e]}" >/dev/null || {
		echo "$e: tunnel carries no ping" >&2
		tail -5 ./*.log >&2
		exit 1
	}
	start "$SNS" iperf-$e.log iperf3 -s -B "${ADDR[$e]}"
done
sleep 0.3

cpu() { # pids...: utime+stime in clock ticks
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' /proc/"$p"/stat)))
	done
	echo $t
}
hz=$(getconf CLK_TCK)
one() { # case engine
	local c=$1 e=$2 before after out
	before=$(cpu "${SRV[$e]}" "${CLI[$e]}")
	case $c in
	ping)
		out=$(ip netns exec "$CNS" ping -f -q -w "$DUR" "${ADDR[$e]}" 2>&1)
		after=$(cpu "${SRV[$e]}" "${CLI[$e]}")
		echo "$out" | awk -v e=$e -v p="$PROTO" -v cpu=$((after - before)) -v hz="$hz" '
			/packets transmitted/ { n = $4; ms = $(NF); sub(/ms/, "", ms) }
			END { printf "%s ping %s round_trips/s %.0f cpu_us/rt %.1f\n", p, e, n / (ms / 1000), cpu / hz * 1e6 / n }'
		;;
	up | down)
		local r=()
		[ "$c" = down ] && r=(-R)
		out=$(ip netns exec "$CNS" iperf3 -c "${ADDR[$e]}" -t "$DUR" -f m "${r[@]}" 2>&1)
		after=$(cpu "${SRV[$e]}" "${CLI[$e]}")
		echo "$out" | awk -v e=$e -v c=$c -v p="$PROTO" -v cpu=$((after - before)) -v hz="$hz" -v d="$DUR" '
			/receiver/ { for (i = 1; i <= NF; i++) if ($(i) == "Mbits/sec") m = $(i - 1) }
			END { gb = m * d / 8 / 1000; printf "%s %s %s Mbit/s %.0f cpu_s/GB %.2f\n", p, c, e, m, (gb > 0 ? cpu / hz / gb : 0) }'
		;;
	esac
}
engines=(A B O)
for rep in $(seq 0 $((REPEATS - 1))); do
	for c in $CASES; do
		for k in 0 1 2; do
			one "$c" "${engines[$(((k + rep) % 3))]}"
		done
	done
done
if [ -n "${PERFSTAT:-}" ]; then
	# System calls and context switches of each engine's two processes
	# during one more flood ping, per round trip.
	for e in A B O; do
		ev=raw_syscalls:sys_enter,context-switches
		for c in epoll_pwait poll ppoll read write writev recvmmsg sendmmsg recvfrom sendto futex nanosleep; do ev=$ev,syscalls:sys_enter_$c; done
		perf stat -x, -e "$ev" -p "${SRV[$e]},${CLI[$e]}" -o "$W/stat-$e" -- sleep "$DUR" &
		pp=$!
		sleep 0.1
		out=$(ip netns exec "$CNS" ping -f -q -w "$((DUR - 1))" "${ADDR[$e]}" 2>&1)
		wait $pp || true
		n=$(echo "$out" | awk '/packets transmitted/ { print $4 }')
		awk -F, -v e=$e -v p="$PROTO" -v n="$n" '$3 ~ /sys_enter|context-switches/ && $1 > 0 { printf "%s perfstat %s %s per_rt %.2f\n", p, e, $3, $1 / n }' "$W/stat-$e"
	done
fi
if [ -n "$PROFILE" ]; then
	mkdir -p "$PROFILE"
	for e in A B; do
		perf record -F 4999 -g -o "$PROFILE/$e.perf.data" -p "${SRV[$e]},${CLI[$e]}" -- sleep "$DUR" >/dev/null 2>&1 &
		pp=$!
		sleep 0.2
		one ping "$e"
		wait $pp || true
	done
fi
