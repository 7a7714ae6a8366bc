#!/usr/bin/env bash
# The long rekey soaks (docs/security.md), REKEYS (default 200) each, with
# the protocols' timers shortened (no product configuration can shorten
# WireGuard's; OpenVPN's reneg-sec takes 1 s as it is):
# - WireGuard in process (device TestRekeySoak): rekeys under traffic both
#   ways; every packet delivered, none sent under a session past
#   RejectAfterTime.
# - WireGuard through two real wirelaned daemons (internal/testkit/e2e
#   TestDaemonRekeySoakWireGuard; needs root): the daemons are built with
#   -tags wirelane_soaktimers (a test build, never a release) and run with
#   WIRELANE_SOAK_REKEY=200ms; numbered UDP both ways every millisecond
#   between network namespaces, at most 1/1000 lost, every handshake
#   counted on both sides, no receive drop for an unknown or expired
#   session. About 0.3 s a rekey.
# - OpenVPN, our client and our server in process (ovpn/server
#   TestRekeySoak): renegotiations driven by the server, then by the client
#   (and REKEYS/4 with every 23rd control datagram lost), under echo
#   traffic through a relay that reads every data packet's key id; none
#   under an expired key (outside the lame duck's transition window), ids
#   in sequence, every echo answered, the session kept.
# - OpenVPN through the real `wirelane ovpn serve` and `wirelane ovpn
#   connect` processes (internal/testkit/e2e TestDaemonRekeySoakOpenVPN;
#   needs root): reneg-sec 1 in the server's file, then in the client's,
#   REKEYS/2 renegotiations each, side by side, through the same key-id
#   relay, numbered UDP both ways; the client connects once. About 2 s a
#   renegotiation (our ends renegotiate on a one-second tick).
# - OpenVPN 2.6's server with reneg-sec 1 against our client
#   (ovpn/client TestE2ERekeySoak; needs root and openvpn; about 1 s per
#   renegotiation).
# All: goroutines (in process) or the daemons' memory flat from the tenth
# rekey on. CI runs 20 (12 against OpenVPN 2.6; 10 and 10 through the
# OpenVPN processes).
# Usage: scripts/soak.sh [REKEYS]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-200}"
filter='^(--- |    --- |ok|FAIL)|rekeys;|rekeys \(|rekeys:|grew|drops|unanswered|expired|lost|only [0-9]+'
SOAK_REKEYS="$n" go test -count=1 -timeout 30m -v -run '^TestRekeySoak$' ./device | grep -E "$filter"
SOAK_REKEYS="$n" go test -count=1 -timeout 30m -v -run '^TestRekeySoak$' ./ovpn/server | grep -E "$filter"
SOAK_OPENVPN_REKEYS="$n" go test -count=1 -timeout 30m -v -run '^TestE2ERekeySoak$' ./ovpn/client | grep -E "$filter"
if [ "$(id -u)" = 0 ]; then
	SOAK_REKEYS="$n" go test -count=1 -timeout 60m -v -run '^(TestDaemonRekeySoakWireGuard|TestDaemonRekeySoakOpenVPN|TestSoakBuildIsNotTheRelease)$' ./internal/testkit/e2e | grep -E "$filter"
else
	echo "soak.sh: not root: the daemon soaks (internal/testkit/e2e TestDaemonRekeySoak*) skipped"
fi
