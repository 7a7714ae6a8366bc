#!/usr/bin/env bash
# The long rekey soaks (docs/security.md), REKEYS (default 200) each, with
# the protocols' timers shortened inside the tests (no product
# configuration can shorten them):
# - WireGuard (device TestRekeySoak): rekeys under traffic both ways; every
#   packet delivered, none sent under a session past RejectAfterTime.
# - OpenVPN, our client and our server (ovpn/server TestRekeySoak):
#   renegotiations driven by the server, then by the client (and REKEYS/4
#   with every 23rd control datagram lost), under echo
#   traffic through a relay that reads every data packet's key id; none
#   under an expired key (outside the lame duck's transition window), ids
#   in sequence, every echo answered, the session kept.
# - OpenVPN 2.6's server with reneg-sec 1 against our client
#   (ovpn/client TestE2ERekeySoak; needs root and openvpn; about 1 s per
#   renegotiation).
# All: goroutines and heap flat from the tenth rekey on. CI runs 20 (12
# against OpenVPN 2.6).
# Usage: scripts/soak.sh [REKEYS]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-200}"
filter='^(--- |ok|FAIL)|rekeys;|rekeys \(|grew|drops|unanswered|expired|lost'
SOAK_REKEYS="$n" go test -count=1 -timeout 30m -v -run '^TestRekeySoak$' ./device | grep -E "$filter"
SOAK_REKEYS="$n" go test -count=1 -timeout 30m -v -run '^TestRekeySoak$' ./ovpn/server | grep -E "$filter"
SOAK_OPENVPN_REKEYS="$n" go test -count=1 -timeout 30m -v -run '^TestE2ERekeySoak$' ./ovpn/client | grep -E "$filter"
